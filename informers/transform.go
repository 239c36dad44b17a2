package informers

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/namespaces"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// lastApplied is the annotation kubectl apply stores the whole applied object
// in, values included.
const lastApplied = corev1.LastAppliedConfigAnnotation

// KeepValues decides what the cache keeps of a Secret or ConfigMap.
type KeepValues func(obj metav1.Object, typ corev1.SecretType) role.Keep

// SourcesIn returns the KeepValues of courier configured as cfg: what the
// object's role (package role) says.
func SourcesIn(cfg role.Config) KeepValues {
	return func(obj metav1.Object, typ corev1.SecretType) role.Keep { return role.Of(obj, typ, cfg).Keep }
}

// Consumed reports whether a workload in the cache consumes the Secret or
// ConfigMap kind namespace/name (nil: none ever does).
type Consumed func(kind, namespace, name string) bool

// Transform returns the cache transform for every informer courier runs.
// It is idempotent: a transformed object passes through unchanged.
//
// A Secret or ConfigMap whose values courier does not keep is held as its
// digests (content.DigestObject) if it bears a mark courier reads
// (role.Marked) or consumed says a workload consumes it; any other as its
// metadata only (content.MetadataOnly): most tenants' objects, which
// courier never reads. One that a workload starts consuming later is read
// by the reloader when it first syncs the workload, and its next change
// the cache holds as digests.
func Transform(keep KeepValues, consumed Consumed) cache.TransformFunc {
	held := func(o metav1.Object, kind string) any {
		marked := role.Marked(o)
		if marked || consumed != nil && consumed(kind, o.GetNamespace(), o.GetName()) {
			return content.DigestObject(o, marked)
		}
		return content.MetadataOnly(o)
	}
	return func(obj any) (any, error) {
		switch o := obj.(type) {
		case *corev1.Secret:
			k := keep(o, o.Type)
			trimMeta(&o.ObjectMeta)
			if k != role.Values {
				return held(o, wellknown.KindSecret), nil
			}
		case *corev1.ConfigMap:
			k := keep(o, "")
			trimMeta(&o.ObjectMeta)
			if k != role.Values {
				return held(o, wellknown.KindConfigMap), nil
			}
		case *corev1.Namespace:
			return namespaces.From(o), nil
		}
		// A workload is cached as a workload.Object: its metadata, its pod
		// template's annotations and what the template consumes; the reloader
		// patches workloads, never updates them whole, and reads nothing else.
		if o, ok := workload.Cached(obj); ok {
			return o, nil
		}
		return obj, nil
	}
}

// MetadataTransform is the cache transform of a metadata-only informer of
// Secrets (secret) or ConfigMaps: the object as content.FromMetadata,
// with its labels and annotations when it bears a mark courier reads
// (role.Marked). The API server never sent its values.
func MetadataTransform(secret bool) cache.TransformFunc {
	return func(obj any) (any, error) {
		o, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return obj, nil // a content.Digested already, or a tombstone
		}
		trimMeta(&o.ObjectMeta)
		return content.FromMetadata(o, secret, role.Marked(o)), nil
	}
}

// trim is trimMeta of a Secret or ConfigMap read whole.
func trim(obj any) {
	switch o := obj.(type) {
	case *corev1.Secret:
		trimMeta(&o.ObjectMeta)
	case *corev1.ConfigMap:
		trimMeta(&o.ObjectMeta)
	}
}

// trimMeta drops what courier never reads: managed fields and kubectl's
// last-applied configuration (it holds the whole applied object, values
// included).
func trimMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	if _, ok := m.Annotations[lastApplied]; ok {
		// The cache owns this object now (transforms run before it is
		// stored), so it may be changed in place; the map may still be
		// shared with the decoder's copy, so replace it rather than delete.
		m.Annotations = without(m.Annotations, lastApplied)
	}
}

func without(m map[string]string, key string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}
