package guard

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// A protected source's backup is an object of the same kind beside it, in
// the source's own namespace (where only platform administrators write, and
// which outlives courier's own namespace when courier is uninstalled): the
// source's content, type, immutability, labels and annotations, as courier
// last saw them. It is the guard's memory of what to restore: kept in the
// cluster, it survives restarts and leader changes, and a standby needs
// nothing of its own.

// backupPrefix starts every backup's name: "courier-backup.<source name>".
const backupPrefix = "courier-backup."

// backupName is the name of the backup of the source called name: the
// prefix and the name, or, where that would be too long for a name, a
// digest of the name.
func backupName(name string) string {
	if len(backupPrefix)+len(name) <= 253 {
		return backupPrefix + name
	}
	sum := sha256.Sum256([]byte(name))
	return backupPrefix + hex.EncodeToString(sum[:16])
}

// isBackup reports whether m is a backup courier made.
func isBackup(m metav1.Object) bool { return role.IsBackup(m) }

// savedMeta is what a backup keeps of its source's metadata.
type savedMeta struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Immutable   bool              `json:"immutable,omitempty"`
}

// metaOf is the metadata a source is restored with: its labels and
// annotations, without what only the cache or kubectl put there.
func metaOf(src metav1.Object, immutable bool) savedMeta {
	a := maps.Clone(src.GetAnnotations())
	delete(a, corev1.LastAppliedConfigAnnotation)
	if len(a) == 0 {
		a = nil
	}
	return savedMeta{Labels: maps.Clone(src.GetLabels()), Annotations: a, Immutable: immutable}
}

func encodeMeta(m savedMeta) string {
	b, _ := json.Marshal(m) // maps of strings always encode
	return string(b)
}

func decodeMeta(s string) (savedMeta, bool) {
	var m savedMeta
	return m, json.Unmarshal([]byte(s), &m) == nil
}

// backupObjectMeta is a backup's metadata for the source src; it carries
// the source's values of scopeLabels (Options.ScopeLabels).
func backupObjectMeta(src metav1.Object, immutable bool, existing metav1.Object, scopeLabels []string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Name:      backupName(src.GetName()),
		Namespace: src.GetNamespace(),
		Labels: map[string]string{
			wellknown.Backup:    "true",
			wellknown.ManagedBy: wellknown.ManagedByValue,
		},
		Annotations: map[string]string{
			wellknown.BackupOf:   src.GetName(),
			wellknown.BackupMeta: encodeMeta(metaOf(src, immutable)),
		},
	}
	for _, k := range scopeLabels {
		if v, ok := src.GetLabels()[k]; ok {
			m.Labels[k] = v
		}
	}
	if existing != nil {
		m.ResourceVersion, m.UID = existing.GetResourceVersion(), existing.GetUID()
	}
	return m
}

// view is a Secret or ConfigMap as the guard compares and copies it.
type view struct {
	obj       runtime.Object
	meta      metav1.Object
	typ       corev1.SecretType
	immutable bool
}

func viewOf(obj any) *view {
	_, typ, immutable, ok := content.Fields(obj)
	if !ok {
		return nil
	}
	return &view{obj: obj.(runtime.Object), meta: obj.(metav1.Object), typ: typ, immutable: immutable != nil && *immutable}
}

// hash is the content hash, computed when asked: only backing up compares
// content, and a protected source's values can be 1 MiB.
func (v *view) hash() string { return content.Hash(content.Entries(v.obj)) }

// backupFor builds the backup of src (existing: the backup there now, or nil).
func backupFor(src *view, existing metav1.Object, scopeLabels []string) runtime.Object {
	m := backupObjectMeta(src.meta, src.immutable, existing, scopeLabels)
	switch o := src.obj.(type) {
	case *corev1.Secret:
		return &corev1.Secret{ObjectMeta: m, Type: o.Type, Data: o.Data}
	case *corev1.ConfigMap:
		return &corev1.ConfigMap{ObjectMeta: m, Data: o.Data, BinaryData: o.BinaryData}
	}
	return nil
}

// upToDate reports whether backup holds what src holds now.
func upToDate(backup, src *view) bool {
	return backup.typ == src.typ &&
		backup.meta.GetAnnotations()[wellknown.BackupMeta] == encodeMeta(metaOf(src.meta, src.immutable)) &&
		backup.hash() == src.hash()
}

// restoredFrom is the source as its backup says it was.
func restoredFrom(backup *view) (runtime.Object, bool) {
	saved, ok := decodeMeta(backup.meta.GetAnnotations()[wellknown.BackupMeta])
	if !ok {
		return nil, false
	}
	m := metav1.ObjectMeta{
		Name:        backup.meta.GetAnnotations()[wellknown.BackupOf],
		Namespace:   backup.meta.GetNamespace(),
		Labels:      saved.Labels,
		Annotations: saved.Annotations,
	}
	var immutable *bool
	if saved.Immutable {
		immutable = &saved.Immutable
	}
	switch o := backup.obj.(type) {
	case *corev1.Secret:
		return &corev1.Secret{ObjectMeta: m, Type: o.Type, Data: o.Data, Immutable: immutable}, true
	case *corev1.ConfigMap:
		return &corev1.ConfigMap{ObjectMeta: m, Data: o.Data, BinaryData: o.BinaryData, Immutable: immutable}, true
	}
	return nil, false
}
