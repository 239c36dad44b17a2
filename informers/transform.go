package informers

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// lastApplied is the annotation kubectl apply stores the whole applied object
// in, values included.
const lastApplied = corev1.LastAppliedConfigAnnotation

// Keep is what the cache keeps of a Secret or ConfigMap.
type Keep int

const (
	// Digests: its values are replaced by their digests (most objects).
	Digests Keep = iota
	// Values: its values, for it may be copied (sources, protected objects
	// and their backups in an allowed source namespace; with --compat,
	// sources that allow pulls).
	Values
	// Applied: digests, like most objects, but kubectl's last-applied
	// configuration is kept, for courier updates the object whole (with
	// --compat, an object that pulls from a source; its values are replaced
	// by the source's, so they are never needed).
	Applied
)

// KeepValues decides what the cache keeps of a Secret or ConfigMap.
type KeepValues func(obj metav1.Object) Keep

// SourcesIn returns the KeepValues for the allowed source namespaces, and
// courier's own namespace, where it keeps the key of its workload digests.
func SourcesIn(allowed func(namespace string) bool, courierNamespace string, compat source.Compat) KeepValues {
	return func(obj metav1.Object) Keep {
		a, l := obj.GetAnnotations(), obj.GetLabels()
		if _, via := source.PullFrom(a, obj.GetNamespace(), compat); via != "" {
			return Applied
		}
		if obj.GetNamespace() == courierNamespace && l[wellknown.DigestKey] == "true" {
			return Values
		}
		if allowed(obj.GetNamespace()) &&
			(source.IsSource(a, compat) || source.AllowsPulls(a, compat) || l[wellknown.Protect] == "true" || l[wellknown.Backup] == "true") {
			return Values
		}
		return Digests
	}
}

// Transform returns the cache transform for every informer courier runs.
// It is idempotent: a transformed object passes through unchanged.
func Transform(keep KeepValues) cache.TransformFunc {
	return func(obj any) (any, error) {
		switch o := obj.(type) {
		case *corev1.Secret:
			k := keep(o)
			trimMeta(&o.ObjectMeta, k == Applied)
			if k != Values {
				return content.DigestObject(o), nil
			}
		case *corev1.ConfigMap:
			k := keep(o)
			trimMeta(&o.ObjectMeta, k == Applied)
			if k != Values {
				return content.DigestObject(o), nil
			}
		case *corev1.Namespace:
			trimMeta(&o.ObjectMeta, false)
			o.Spec = corev1.NamespaceSpec{}
			o.Status.Conditions = nil
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

// trimMeta drops what courier never reads: managed fields and, unless
// keepApplied, kubectl's last-applied configuration.
func trimMeta(m *metav1.ObjectMeta, keepApplied bool) {
	m.ManagedFields = nil
	if _, ok := m.Annotations[lastApplied]; ok && !keepApplied {
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
