// Package replicator keeps a replica of every source Secret and ConfigMap in
// every namespace its courier.dev/replicate-to selector matches, and keeps
// each replica equal to its source: it is the one owner of "make the replica
// equal to the source", including undoing edits made to replicas.
//
// Work is keyed, never object-carrying: a source key fans out (from the
// cache only) into one key per (source, target namespace), and workers
// handle those pairs concurrently, each with at most one write. It never
// modifies or deletes an object it did not create, and never writes into a
// namespace being deleted.
package replicator
