// Package wellknown holds the names courier reads and writes on Kubernetes objects:
// label and annotation keys under courier.dev/, and the field manager of every
// write. It holds names only; no behaviour.
package wellknown

const (
	// Prefix of every key courier owns.
	Prefix = "courier.dev/"

	// FieldManager is the field manager of every write courier makes.
	FieldManager = "courier"

	// ReplicateTo (annotation, on a source Secret or ConfigMap): a namespace
	// label selector in kubectl -l syntax; "*" or empty: every eligible
	// namespace; by name: "kubernetes.io/metadata.name in (a,b)".
	ReplicateTo = Prefix + "replicate-to"
	// Protect (label, on a source): "true" asks the guard to protect it.
	Protect = Prefix + "protect"
	// Reload (annotation, on a source or a workload): "true" opts into
	// reloads; on a workload, "false" opts out of every reload, and
	// "notify" opts in to be told, not rolled out.
	Reload = Prefix + "reload"
	// ReloadNotify is Reload's value for notify only.
	ReloadNotify = "notify"
	// ReloadOn (annotation, on a workload or a custom resource): "secret/a,
	// configmap/b": reload when these change (for a custom resource of a
	// --reload-resources kind: what it consumes).
	ReloadOn = Prefix + "reload-on"
	// ReloadMinInterval (annotation, on a workload): a duration such as
	// "10m": at most one rollout per interval; changes within it are kept and
	// roll out once, at its end.
	ReloadMinInterval = Prefix + "reload-min-interval"
	// ReloadFinished (annotation, on a Job): "true" has courier recreate
	// the Job for a change of its inputs even when it has finished
	// (Complete or Failed), which runs it again; without it, a finished Job
	// is left as it is.
	ReloadFinished = Prefix + "reload-finished"
	// ReloadWave (annotation, on a workload): "0" to "9", its rollout wave:
	// for one change of an input, a workload rolls out only once every
	// workload of an earlier wave consuming the same content is healthy on
	// it (default 0; under --compat=reloader, none).
	ReloadWave = Prefix + "reload-wave"
	// ReplicateKeys (annotation, on a source): "ca.crt, tls.crt": its
	// replicas hold only these keys.
	ReplicateKeys = Prefix + "replicate-keys"
	// CopyLabels (annotation, on a source): "a.example.com/key,
	// b.example.com/*": the source's labels copied onto its replicas.
	CopyLabels = Prefix + "copy-labels"
	// CopyAnnotations (annotation, on a source): as copy-labels, for the
	// source's annotations.
	CopyAnnotations = Prefix + "copy-annotations"
	// CopiedMetadata (annotation, on a replica): JSON of the labels and
	// annotations courier copied onto it from its source; set by courier.
	CopiedMetadata = Prefix + "copied-metadata"
	// Via (annotation, on a replica or an object that pulls): the other
	// tool's annotation (under --compat) that made it; set by courier.
	Via = Prefix + "via"
	// PulledFrom (annotation, on an object that pulls under --compat):
	// "<namespace>/<name>" of the source courier filled it from; set by
	// courier.
	PulledFrom = Prefix + "pulled-from"
	// Replication (label, on a namespace): "disabled" means courier never
	// replicates into it.
	Replication = Prefix + "replication"

	// Replica (label, on a replica): "true" marks an object courier created
	// as a replica.
	Replica = Prefix + "replica"
	// Source (annotation, on a replica): "<namespace>/<name>" of its source.
	Source = Prefix + "source"
	// Backup (label, on a backup): "true" marks the backup courier keeps of
	// a protected source: courier-backup.<name>, beside the source.
	Backup = Prefix + "backup"
	// BackupOf (annotation, on a backup): "<namespace>/<name>" of the
	// protected source it keeps.
	BackupOf = Prefix + "backup-of"
	// BackupMeta (annotation, on a backup): the source's labels, annotations
	// and immutability, as JSON.
	BackupMeta = Prefix + "backup-meta"
	// DigestKey (label, on the digest key Secret): "true" marks the Secret
	// courier-digest-key in an installation's namespace, which holds the key
	// of the digests courier writes on workloads (config-inputs).
	DigestKey = Prefix + "digest-key"
	// DigestKeySecret is the name of that Secret.
	DigestKeySecret = "courier-digest-key"
	// Settings (label, on the settings ConfigMap): "true" marks the
	// ConfigMap courier-settings in an installation's namespace, where its
	// leader publishes the flags it runs with, for `courier status`.
	Settings = Prefix + "settings"
	// Installation (annotation, on a replica): the courier installation that
	// made it: the namespace that installation runs in (--namespace).
	Installation = Prefix + "installation"
	// SourceCluster (annotation, on a replica in another cluster): the
	// --cluster-name of the cluster its source is in (docs/clusters.md).
	// The cluster's own courier never takes such a replica for its own.
	SourceCluster = Prefix + "source-cluster"
	// TargetCluster (annotation, on a replica in another cluster): the
	// name the cluster Secret it was written through gives that cluster;
	// only that cluster Secret's replication takes it for its own, so two
	// cluster Secrets that reach one cluster never undo each other.
	TargetCluster = Prefix + "target-cluster"
	// ReplicateToClusters (annotation, on a source): a label selector over
	// the cluster Secrets in courier's namespace ("*": every one); the
	// source's replicate-to selector is then also applied to the namespaces
	// of each selected cluster.
	ReplicateToClusters = Prefix + "replicate-to-clusters"
	// Cluster (label, on a Secret in courier's namespace): the Secret
	// describes a cluster courier replicates into, named by the label's
	// value; its key ClusterKubeconfig holds the kubeconfig to reach it.
	Cluster = Prefix + "cluster"
	// ClusterKubeconfig is the key of a cluster Secret holding its kubeconfig.
	ClusterKubeconfig = "kubeconfig"
	// DefaultClusterName is what replicas in other clusters name as their
	// source's cluster when --cluster-name is not set.
	DefaultClusterName = "hub"
	// ContentHash (annotation, on a replica): sha256 of its content.
	ContentHash = Prefix + "content-hash"
	// ConfigHash (annotation, on a pod template, or a custom resource's
	// annotations or its kind's field path): sha256 of the consumed keys;
	// changing it is what rolls a workload out.
	ConfigHash = Prefix + "config-hash"
	// ReloadedFor (annotation, on a workload): what changed, at the last
	// reload.
	ReloadedFor = Prefix + "reloaded-for"
	// ReloadedAt (annotation, on a workload): when courier last rolled it
	// out, RFC 3339 in UTC.
	ReloadedAt = Prefix + "reloaded-at"
	// ConfigInputs (annotation, on a workload's metadata, not its template):
	// courier's baseline: a short keyed digest of each opted-in input it
	// consumes, and the key's name; writing it is not a rollout. Set by
	// courier.
	ConfigInputs = Prefix + "config-inputs"
	// ConfigVersions (annotation, on a workload's metadata, beside
	// config-inputs): the resourceVersion each input courier holds the
	// metadata of only had when its digest in config-inputs was made, so a
	// restart reads only the inputs that moved since. Set by courier.
	ConfigVersions = Prefix + "config-versions"

	// ManagedBy (label, on a replica, a backup, the digest key Secret or the
	// settings ConfigMap):
	// "courier" (ManagedByValue) on every object courier creates.
	ManagedBy      = "app.kubernetes.io/managed-by"
	ManagedByValue = "courier"

	// NamespaceName (label, on a namespace): its name, set by the API
	// server; replicate-to selects namespaces by name with it.
	NamespaceName = "kubernetes.io/metadata.name"

	// KindSecret and KindConfigMap name the kinds courier replicates and
	// guards, in work-queue keys, metric labels and log fields.
	KindSecret    = "Secret"
	KindConfigMap = "ConfigMap"
	// KindSecretProviderClass names a Secrets Store CSI driver
	// SecretProviderClass consumed through a CSI volume (CSIDriver): an
	// input whose content is the object versions the driver reports
	// (--reload-csi).
	KindSecretProviderClass = "SecretProviderClass"
	// CSIDriver is the Secrets Store CSI driver's name in a pod's csi
	// volumes; volumeAttributes.secretProviderClass names the class.
	CSIDriver = "secrets-store.csi.k8s.io"

	// HelmReleaseType is the Secret type Helm stores releases in; courier
	// never lists or watches those Secrets.
	HelmReleaseType = "helm.sh/release.v1"
)
