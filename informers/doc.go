// Package informers builds the one set of shared informers every courier
// controller reads from, and owns what that cache holds.
//
// Secrets are listed with a server-side field selector that leaves out Helm
// release Secrets, which are large and never replicated. Transforms drop what
// courier never reads: managedFields and the last-applied annotation always,
// workload status, and the values of every Secret and ConfigMap courier does
// not copy (anything but a source or a protected object in an allowed source
// namespace). Those values are replaced by their digests (package content), so
// the cache grows with the number of objects and keys, not with their bytes,
// and holds no secret value it does not need.
//
// It never writes to the API and never hands out objects for modification:
// callers copy before they change anything.
package informers
