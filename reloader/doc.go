// Package reloader rolls out the workloads (Deployments, StatefulSets,
// DaemonSets, CronJobs, Jobs) whose consumed Secret or ConfigMap content changed,
// exactly once per change, by writing courier.dev/config-hash into the pod
// template: the workload's own rollout strategy does the rest, as with
// `kubectl rollout restart`. A Job that opts in, whose pod template cannot
// change, is recreated instead (job.go).
//
// It keeps a baseline per workload (courier.dev/config-inputs, on the
// workload's metadata, so writing it is not a rollout): a short digest of the
// consumed keys of each opted-in input. A rollout happens only when an input
// present in the baseline and now has different consumed content. So first
// sight, restarts, leader changes, metadata-only writes, resyncs, deletions
// and first appearances never roll anything out, and a change made while
// courier was down rolls out once. It hashes from the informer cache (per-key
// digests); an input the cache holds the metadata of only it reads by name
// once per version (gather.go), and records the version each baseline
// digest was made of (courier.dev/config-versions, versions.go) so a
// restart reads only what moved since. Its patches touch only courier's
// annotations.
//
// Each sync of a workload is three steps: gather (gather.go) reads the
// caches and the per-process state into facts; the policies (policies.go)
// turn the facts into a verdict, reading and writing nothing; act (act.go)
// carries the verdict out and tells of it.
package reloader
