// Package role decides what a Secret or ConfigMap is to courier — a
// source, a pull target, a replica, a backup, the digest key, or someone
// else's object — from its labels, annotations, namespace and type, and
// courier's configuration. It is the one owner of that decision: the cache
// transform, the indexes, the three controllers and the commands ask it
// instead of reading the annotations themselves. It is pure: it reads
// nothing but what it is given and writes nothing.
package role

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-k8s/courier/internal/objmeta"
	"github.com/courier-k8s/courier/internal/replica"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// Config is what of courier's configuration an object's role depends on.
type Config struct {
	// Compat is --compat: which other tools' annotations courier honours.
	Compat source.Compat
	// Allowed is --source-namespaces: the namespaces sources may live in
	// (nil allows none).
	Allowed func(namespace string) bool
	// Namespace is courier's own namespace (--namespace): the installation.
	Namespace string
}

func (c Config) allowed(ns string) bool { return c.Allowed != nil && c.Allowed(ns) }

// Kind is what an object is to courier.
type Kind int

const (
	// Other: someone else's object; courier copies nothing from it (it may
	// still be a workload's input).
	Other Kind = iota
	// Source: courier copies its values elsewhere: it pushes (replicate-to,
	// or with --compat another tool's push), allows pulls (--compat), or is
	// labelled protect.
	Source
	// PullTarget: with --compat, it pulls from a source through another
	// tool's annotation; courier fills it with the source's content.
	PullTarget
	// Replica: a copy courier made (any installation's).
	Replica
	// Backup: the backup courier keeps of a protected source.
	Backup
	// DigestKey: the Secret in courier's namespace holding the key of the
	// digests it writes on workloads.
	DigestKey
)

func (k Kind) String() string {
	return [...]string{"other", "source", "pull target", "replica", "backup", "digest key"}[k]
}

// Problems: the reason of the Warning Event an object's owner gets when its
// annotations ask for something courier will not do.
const (
	// SourceNotAllowed: a source outside --source-namespaces.
	SourceNotAllowed = wellknown.ReasonSourceNotAllowed
	// SourceNotReplicable: a ServiceAccount token Secret asked to be copied.
	SourceNotReplicable = wellknown.ReasonSourceNotReplicable
)

// Keep is what the cache keeps of a Secret or ConfigMap.
type Keep int

const (
	// Digests: its values are replaced by their digests (most objects).
	Digests Keep = iota
	// Values: its values, for courier copies them (sources in an allowed
	// namespace, backups, the digest key).
	Values
)

// Role is what an object is to courier, and the facts behind it.
type Role struct {
	Kind Kind
	// Pushes: its annotations ask for replicas (courier's replicate-to, or
	// with --compat another tool's push annotations).
	Pushes bool
	// AllowsPulls: with --compat, another tool's annotations let targets
	// pull from it.
	AllowsPulls bool
	// Protected: the guard keeps a backup of it and restores it: labelled
	// protect, in an allowed namespace, owned by no other object.
	Protected bool
	// Allowed: its namespace may hold sources (--source-namespaces).
	Allowed bool
	// PullRef and PullVia: with --compat, the source its pull annotation
	// names ("namespace/name") and that annotation ("" when it pulls from
	// nothing).
	PullRef, PullVia string
	// Problem is the Event reason when its annotations ask for something
	// courier refuses ("" for none).
	Problem string
	// Keep is what the cache keeps of it.
	Keep Keep
}

// Of is the role of the Secret or ConfigMap m (typ is a Secret's type, ""
// for a ConfigMap) to courier configured as cfg.
func Of(m metav1.Object, typ corev1.SecretType, cfg Config) Role {
	a, l, ns := m.GetAnnotations(), m.GetLabels(), m.GetNamespace()
	r := Role{
		Allowed:     cfg.allowed(ns),
		Pushes:      source.IsSource(a, cfg.Compat),
		AllowsPulls: source.AllowsPulls(a, cfg.Compat),
	}
	r.PullRef, r.PullVia = source.PullFrom(a, ns, cfg.Compat)
	switch {
	case ns == cfg.Namespace && l[wellknown.DigestKey] == "true":
		r.Kind, r.Keep = DigestKey, Values
	case IsBackup(m):
		r.Kind = Backup
	case replica.Marked(m):
		r.Kind = Replica
	case r.Pushes || r.AllowsPulls || l[wellknown.Protect] == "true":
		// A source that also pulls stays a source: its pull is refused
		// (PullRefused), never its replicas, its backup or its values.
		r.Kind = Source
		r.Protected = l[wellknown.Protect] == "true" && r.Allowed && len(m.GetOwnerReferences()) == 0
		switch {
		case r.Pushes && !r.Allowed:
			r.Problem = SourceNotAllowed
		case r.Pushes && typ == corev1.SecretTypeServiceAccountToken:
			r.Problem = SourceNotReplicable
		}
	case r.PullVia != "":
		r.Kind = PullTarget // digests: courier patches its content, never reads it
	}
	if (r.Kind == Source || r.Kind == Backup) && r.Allowed {
		r.Keep = Values
	}
	return r
}

// Replicates reports whether courier replicates the object: a source that
// pushes from an allowed namespace, whatever its selector says.
func (r Role) Replicates() bool {
	return r.Kind == Source && r.Pushes && r.Problem == ""
}

// IsBackup reports whether m is a backup courier made (label and annotation).
func IsBackup(m metav1.Object) bool {
	_, of := objmeta.Annotation(m, wellknown.BackupOf)
	backup, _ := objmeta.Label(m, wellknown.Backup)
	return of && backup == "true"
}

// Marked reports whether m bears any label or annotation courier reads: a
// key of courier's (courier.dev/, and its subdomains) or of a tool it is
// compatible with (Reloader, kubernetes-replicator, Reflector), or courier's
// managed-by label. The cache keeps the labels and annotations of a Secret
// or ConfigMap courier does not copy only when it is marked: one that bears
// none (most tenants' objects) can be no source, replica, backup, pull or
// reload opt-in, and courier writes it at most by a patch of its content.
func Marked(m metav1.Object) bool {
	if m.GetLabels()[wellknown.ManagedBy] == wellknown.ManagedByValue {
		return true
	}
	for _, keys := range []map[string]string{m.GetAnnotations(), m.GetLabels()} {
		for k := range keys {
			if ownDomain(k) {
				return true
			}
		}
	}
	return false
}

// ownDomain reports whether a label or annotation key is in a domain courier
// reads: its own, kubernetes-replicator's, Reflector's or Reloader's.
func ownDomain(key string) bool {
	domain, _, ok := strings.Cut(key, "/")
	return source.ToolKey(key) || ok && (domain == "reloader.stakater.com" || strings.HasSuffix(domain, ".reloader.stakater.com"))
}
