// Package wellknown holds the names courier reads and writes on Kubernetes objects:
// label and annotation keys under courier.dev/, and the field manager of every
// write. It holds names only; no behaviour.
package wellknown

const (
	// Prefix of every key courier owns.
	Prefix = "courier.dev/"

	// FieldManager is the field manager of every write courier makes.
	FieldManager = "courier"

	// ReplicateTo (annotation, on a source) is a namespace label selector.
	ReplicateTo = Prefix + "replicate-to"
	// Protect (label, on a source) asks the guard to protect it.
	Protect = Prefix + "protect"
	// Reload (annotation, on a source or a workload) opts into reloads ("true")
	// or, on a workload, out of them ("false").
	Reload = Prefix + "reload"
	// ReloadOn (annotation, on a workload) lists "secret/a, configmap/b".
	ReloadOn = Prefix + "reload-on"
	// ReplicateKeys (annotation, on a source) lists the keys its replicas
	// hold: "ca.crt, tls.crt".
	ReplicateKeys = Prefix + "replicate-keys"
	// CopyLabels and CopyAnnotations (annotations, on a source) list the
	// source's label and annotation keys (exact, or "prefix/*") copied onto
	// its replicas.
	CopyLabels      = Prefix + "copy-labels"
	CopyAnnotations = Prefix + "copy-annotations"
	// CopiedMetadata (annotation, on a replica) records, as JSON, the labels
	// and annotations courier copied onto it from its source.
	CopiedMetadata = Prefix + "copied-metadata"
	// Via (annotation, on a replica made through another tool's annotation
	// under --compat) names that annotation.
	Via = Prefix + "via"
	// PulledFrom (annotation, on an object that pulls from a source through
	// another tool's annotation under --compat) is "<namespace>/<name>" of
	// the source courier filled it from.
	PulledFrom = Prefix + "pulled-from"
	// Replication (label, on a namespace) set to "disabled" excludes it.
	Replication = Prefix + "replication"

	// Replica (label) marks an object courier created as a replica.
	Replica = Prefix + "replica"
	// Source (annotation, on a replica) is "<namespace>/<name>" of its source.
	Source = Prefix + "source"
	// Backup (label, "true") marks the backup courier keeps of a protected
	// source, beside it; BackupOf (annotation) names the source and
	// BackupMeta (annotation) holds its labels, annotations and
	// immutability as JSON.
	Backup     = Prefix + "backup"
	BackupOf   = Prefix + "backup-of"
	BackupMeta = Prefix + "backup-meta"
	// DigestKey (label, "true") marks the Secret in courier's namespace that
	// holds the key of the digests courier writes on workloads:
	// DigestKeySecret. Every installation writes one in its namespace.
	DigestKey       = Prefix + "digest-key"
	DigestKeySecret = "courier-digest-key"
	// Installation (annotation, on a replica) names the courier installation
	// that made it: the namespace that installation runs in (--namespace).
	Installation = Prefix + "installation"
	// ContentHash (annotation, on a replica) is the sha256 of its content.
	ContentHash = Prefix + "content-hash"
	// ConfigHash (annotation, on a pod template) is the sha256 of the consumed
	// keys and values; changing it is what rolls a workload out.
	ConfigHash = Prefix + "config-hash"
	// ReloadedFor (annotation, on a workload) names what changed last.
	ReloadedFor = Prefix + "reloaded-for"
	// ReloadedAt (annotation, on a workload) is when courier last rolled it
	// out, RFC 3339 in UTC.
	ReloadedAt = Prefix + "reloaded-at"
	// ConfigInputs (annotation, on a workload's metadata, not its template)
	// is the reloader's baseline: a short digest of each opted-in input it
	// consumes, as last seen. Writing it is not a rollout.
	ConfigInputs = Prefix + "config-inputs"

	// ManagedBy is the well-known label set to ManagedByValue on replicas.
	ManagedBy      = "app.kubernetes.io/managed-by"
	ManagedByValue = "courier"

	// NamespaceName is the label the API server sets on every namespace.
	NamespaceName = "kubernetes.io/metadata.name"

	// KindSecret and KindConfigMap name the kinds courier replicates and
	// guards, in work-queue keys, metric labels and log fields.
	KindSecret    = "Secret"
	KindConfigMap = "ConfigMap"

	// HelmReleaseType is the Secret type Helm stores releases in; courier
	// never lists or watches those Secrets.
	HelmReleaseType = "helm.sh/release.v1"
)
