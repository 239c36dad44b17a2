package informers

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/content"
	"github.com/courier-k8s/courier/keys"
)

// lastApplied is the annotation kubectl apply stores the whole applied object
// in, values included.
const lastApplied = corev1.LastAppliedConfigAnnotation

// KeepValues decides whether a Secret or ConfigMap keeps its values in the
// cache: only sources and protected objects in an allowed source namespace.
type KeepValues func(obj metav1.Object) bool

// SourcesIn returns the KeepValues for the allowed source namespaces.
func SourcesIn(allowed func(namespace string) bool) KeepValues {
	return func(obj metav1.Object) bool {
		if !allowed(obj.GetNamespace()) {
			return false
		}
		_, source := obj.GetAnnotations()[keys.ReplicateTo]
		return source || obj.GetLabels()[keys.Protect] == "true"
	}
}

// Transform returns the cache transform for every informer courier runs.
// It is idempotent: a transformed object passes through unchanged.
func Transform(keep KeepValues) cache.TransformFunc {
	return func(obj any) (any, error) {
		switch o := obj.(type) {
		case *corev1.Secret:
			trimMeta(&o.ObjectMeta)
			if !keep(o) {
				digestSecret(o)
			}
		case *corev1.ConfigMap:
			trimMeta(&o.ObjectMeta)
			if !keep(o) {
				digestConfigMap(o)
			}
		case *corev1.Namespace:
			trimMeta(&o.ObjectMeta)
			o.Spec = corev1.NamespaceSpec{}
			o.Status.Conditions = nil
		case *appsv1.Deployment:
			trimMeta(&o.ObjectMeta)
			o.Status = appsv1.DeploymentStatus{}
		case *appsv1.StatefulSet:
			trimMeta(&o.ObjectMeta)
			o.Status = appsv1.StatefulSetStatus{}
		case *appsv1.DaemonSet:
			trimMeta(&o.ObjectMeta)
			o.Status = appsv1.DaemonSetStatus{}
		case *batchv1.CronJob:
			trimMeta(&o.ObjectMeta)
			o.Status = batchv1.CronJobStatus{}
		}
		return obj, nil
	}
}

func trimMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	if _, ok := m.Annotations[lastApplied]; ok {
		// The cache owns this object now (transforms run before it is
		// stored), so it may be changed in place; the map may still be
		// shared with the decoder's copy, so replace it rather than delete.
		m.Annotations = without(m.Annotations, lastApplied)
	}
}

func digestSecret(s *corev1.Secret) {
	if content.IsDigested(s) {
		return
	}
	data := make(map[string][]byte, len(s.Data))
	for k, v := range s.Data {
		data[k] = []byte(content.Digest(v))
	}
	s.Data = data
	s.StringData = nil
	s.Annotations = with(s.Annotations, content.DigestedAnnotation, content.DigestedValue)
}

func digestConfigMap(cm *corev1.ConfigMap) {
	if content.IsDigested(cm) {
		return
	}
	if cm.Data != nil {
		data := make(map[string]string, len(cm.Data))
		for k, v := range cm.Data {
			data[k] = content.Digest([]byte(v))
		}
		cm.Data = data
	}
	if cm.BinaryData != nil {
		bin := make(map[string][]byte, len(cm.BinaryData))
		for k, v := range cm.BinaryData {
			bin[k] = []byte(content.Digest(v))
		}
		cm.BinaryData = bin
	}
	cm.Annotations = with(cm.Annotations, content.DigestedAnnotation, content.DigestedValue)
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

func with(m map[string]string, key, value string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	out[key] = value
	return out
}
