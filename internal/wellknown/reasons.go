package wellknown

// Event reasons: every Event courier records has one of these. Each
// comment says what the Event is on, its type, and what to do; it is the
// row of docs/reference.md's table (make docs).
const (
	// ReasonSourceNotAllowed (Warning, on a source): its namespace is not in
	// --source-namespaces, so nothing is replicated from it. Move the source,
	// or add its namespace to --source-namespaces.
	ReasonSourceNotAllowed = "SourceNotAllowed"
	// ReasonSourceNotReplicable (Warning, on a source): a ServiceAccount
	// token Secret is never copied. Replicate a Secret of another type.
	ReasonSourceNotReplicable = "SourceNotReplicable"
	// ReasonInvalidSelector (Warning, on a source): courier.dev/replicate-to
	// (or another tool's namespace list under --compat) does not parse; the
	// replicas stay as they were until it is fixed.
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonInvalidAnnotation (Warning, on a source or a workload): a
	// courier.dev/ annotation (replicate-keys, copy-labels, reload-on, …)
	// or, under --compat, another tool's has a bad value; the message names
	// it and what is wrong. On a source nothing changes until it is fixed;
	// on a workload the bad entries are ignored.
	ReasonInvalidAnnotation = "InvalidAnnotation"
	// ReasonReplicateKeyMissing (Warning, on a source): courier.dev/replicate-keys
	// names a key the source does not have; the other keys are replicated.
	ReasonReplicateKeyMissing = "ReplicateKeyMissing"
	// ReasonReplicaConflict (Warning, on a source): a target namespace holds
	// an object of the replica's name that courier did not make; it is never
	// touched. Delete or rename it, and the replica is written.
	ReasonReplicaConflict = "ReplicaConflict"
	// ReasonSourceOutOfView (Warning, on a replica or a protected source's
	// backup): the source is not in courier's view (--watch-namespaces,
	// --resource-label-selector). On each replica, once: courier cannot
	// tell whether the source still exists, so it leaves the replica as it
	// is; bring the source back into the view, or delete the replica. On
	// the backup of a protected source that left the view: courier can no
	// longer protect it, and deletes the backup.
	ReasonSourceOutOfView = "SourceOutOfView"
	// ReasonReplicaReverted (Warning, on a replica): someone edited or
	// deleted a replica; courier put its source's content back.
	ReasonReplicaReverted = "ReplicaReverted"
	// ReasonReplicaContested (Warning, on a replica or a protected source):
	// something keeps changing it (more than 5 reverts in a minute); courier
	// backs off, up to 5 minutes. Find the other writer in the managed fields.
	ReasonReplicaContested = "ReplicaContested"
	// ReasonReplicaFailed (Warning, on a source): a replica could not be
	// written (the message names the namespace and the API error, such as a
	// missing permission or a quota); courier retries with backoff.
	ReasonReplicaFailed = "ReplicaFailed"
	// ReasonPullRefused (Warning, on an object that pulls under --compat):
	// the source it names is missing, not allowed or does not allow it;
	// nothing is written until that changes.
	ReasonPullRefused = "PullRefused"
	// ReasonSourceRestored (Warning, on a protected source): it was deleted
	// and courier recreated it from its backup.
	ReasonSourceRestored = "SourceRestored"
	// ReasonBackupBlocked (Warning, on a protected source): its backup's name
	// is taken by an object courier did not make, so it has no backup.
	// Rename or delete that object.
	ReasonBackupBlocked = "BackupBlocked"
	// ReasonRestoreFailed (Warning, on a protected source's backup): the
	// source is deleted and the API server refused to create it again (a
	// quota, an admission policy, a missing permission); courier retries
	// every 5 s. The message has the API server's answer.
	ReasonRestoreFailed = "RestoreFailed"
	// ReasonReloaded (Normal, on a workload): courier rolled it out; the
	// message names the input that changed.
	ReasonReloaded = "Reloaded"
	// ReasonReloadNotified (Normal, on a workload): it would have rolled out
	// (the message says for what), but it asks only to be told
	// (courier.dev/reload: notify, or --reload-mode=notify); a notification
	// went out too.
	ReasonReloadNotified = "ReloadNotified"
	// ReasonReloadSuppressed (Warning, on a Secret or ConfigMap, and on each
	// workload whose rollout it holds back): it changed more than
	// --reload-storm-changes times within --reload-storm-window, so its
	// changes roll nothing out until it is quiet for a window; then its
	// consumers roll out once, if what they consume differs. Find what keeps
	// changing it.
	ReasonReloadSuppressed = "ReloadSuppressed"
	// ReasonReloadDelayed (Normal, on a workload): an input changed within
	// its courier.dev/reload-min-interval (or Reloader's pause-period) of the
	// last rollout; the message says when it rolls out, once, with every
	// change made meanwhile.
	ReasonReloadDelayed = "ReloadDelayed"
	// ReasonReloadWaiting (Normal, on a workload): an input it consumes
	// changed, and it rolls out once the earlier rollout waves are healthy.
	ReasonReloadWaiting = "ReloadWaiting"
	// ReasonReloadHalted (Warning, on a workload held by a wave, and on
	// the input whose change is halted, and its source): a workload of an
	// earlier wave failed or was not healthy within --reload-wave-timeout.
	ReasonReloadHalted = "ReloadHalted"
	// ReasonJobFinished (Normal, on a Job): an input it consumes changed,
	// but the Job has finished, so courier does not recreate it (unless it
	// carries courier.dev/reload-finished: "true").
	ReasonJobFinished = "JobFinished"
	// ReasonJobNotRecreated (Warning, on a Job courier deleted to recreate
	// it): creating it again failed (a quota, an admission policy); courier
	// retries with backoff until it succeeds or a Job of that name appears.
	ReasonJobNotRecreated = "JobNotRecreated"
	// ReasonInputMissing (Warning, on a workload): an input it consumes
	// without optional: true does not exist; nothing is rolled out for it.
	ReasonInputMissing = "InputMissing"
	// ReasonHashNotStored (Warning, on a custom resource): the field path
	// given in --reload-resources cannot hold courier.dev/config-hash, so no
	// rollout happened. Fix the field path.
	ReasonHashNotStored = "HashNotStored"
	// ReasonSettingsBlocked (Warning, on a ConfigMap named courier-settings
	// in courier's namespace that courier did not create): courier leaves it
	// alone, so `courier status` cannot read the installation's flags.
	// Rename or delete it.
	ReasonSettingsBlocked = "SettingsBlocked"
	// ReasonClusterInvalid (Warning, on a cluster Secret in courier's
	// namespace): its courier.dev/cluster name or its kubeconfig key cannot
	// be used (the message says which and why); nothing is replicated into
	// that cluster until it is fixed. Other clusters are not held up.
	ReasonClusterInvalid = "ClusterInvalid"
	// ReasonClusterUnreachable (Warning, on a cluster Secret): the cluster
	// cannot be reached or refuses courier's identity there (the message
	// gives the API error); courier retries with backoff, deletes nothing
	// meanwhile, and writes what changed once it is back. Check the address
	// and credentials, and the RBAC of manifests/remote-cluster there.
	ReasonClusterUnreachable = "ClusterUnreachable"
	// ReasonClusterReachable (Normal, on a cluster Secret): the cluster
	// answers again after being unreachable; its replicas are brought up to
	// date.
	ReasonClusterReachable = "ClusterReachable"
)
