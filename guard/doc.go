// Package guard protects sources and replicas.
//
// Prevention lives in the API server: manifests/ ship a
// ValidatingAdmissionPolicy that denies UPDATE and DELETE of protected sources
// and replicas to anyone without the RBAC verb "override". Informers cannot
// say who wrote a change, so this package never guesses at attribution; it
// only restores what must hold:
//
//   - a protected source (label courier.dev/protect=true, in an allowed source
//     namespace) that is deleted anyway is recreated from its last-seen state
//     (Controller, with its own work queue);
//   - replicas are made equal to their source by the replicator, the single
//     owner of that logic; this package gives it the revert budget (Budget)
//     that stops a fight with another writer from becoming a loop.
package guard
