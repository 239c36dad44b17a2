// Package guard protects sources and replicas.
//
// Prevention lives in the API server: manifests/ ship a
// ValidatingAdmissionPolicy that denies UPDATE and DELETE of protected sources
// and replicas to anyone without the RBAC verb "override". Informers cannot
// say who wrote a change, so this package never guesses at attribution; it
// only restores what must hold:
//
//   - a protected source (label courier.dev/protect=true, in an allowed source
//     namespace, owned by nothing) has a backup beside it, in its own
//     namespace (courier-backup.<name>), kept equal to it; when the source is
//     deleted anyway — while courier runs or not, through a finalizer or a
//     foreground deletion — it is recreated from that backup, and the
//     replicator keeps its replicas meanwhile (Controller.Restoring). The
//     state lives in the cluster, not in a process: a standby holds nothing,
//     and a retired source (label removed, then deleted) loses its backup and
//     stays gone (Controller, with its own work queue);
//   - replicas are made equal to their source by the replicator, the single
//     owner of that logic; this package gives it the revert budget (Budget)
//     that stops a fight with another writer from becoming a loop.
package guard
