package informers

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
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
				content.DigestSecret(o)
			}
		case *corev1.ConfigMap:
			k := keep(o)
			trimMeta(&o.ObjectMeta, k == Applied)
			if k != Values {
				content.DigestConfigMap(o)
			}
		case *corev1.Namespace:
			trimMeta(&o.ObjectMeta, false)
			o.Spec = corev1.NamespaceSpec{}
			o.Status.Conditions = nil
		// A workload keeps its annotations and only its pod template's
		// annotations and spec: the reloader patches workloads, never updates
		// them whole, and reads nothing else (labels, selectors, a
		// StatefulSet's claim templates and status made a cached Deployment
		// large).
		case *appsv1.Deployment:
			trimWorkloadMeta(&o.ObjectMeta)
			o.Spec, o.Status = appsv1.DeploymentSpec{Template: onlyTemplate(o.Spec.Template)}, appsv1.DeploymentStatus{}
		case *appsv1.StatefulSet:
			trimWorkloadMeta(&o.ObjectMeta)
			o.Spec, o.Status = appsv1.StatefulSetSpec{Template: onlyTemplate(o.Spec.Template)}, appsv1.StatefulSetStatus{}
		case *appsv1.DaemonSet:
			trimWorkloadMeta(&o.ObjectMeta)
			o.Spec, o.Status = appsv1.DaemonSetSpec{Template: onlyTemplate(o.Spec.Template)}, appsv1.DaemonSetStatus{}
		case *batchv1.CronJob:
			trimWorkloadMeta(&o.ObjectMeta)
			o.Spec = batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: onlyTemplate(o.Spec.JobTemplate.Spec.Template)}}}
			o.Status = batchv1.CronJobStatus{}
		}
		if _, t := workload.Of(obj); t != nil {
			trimPodSpec(&t.Spec)
		}
		return obj, nil
	}
}

func trimWorkloadMeta(m *metav1.ObjectMeta) {
	trimMeta(m, false)
	m.Labels = nil
}

// onlyTemplate is a pod template with only its annotations and spec.
func onlyTemplate(t corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: t.Annotations}, Spec: t.Spec}
}

// trimPodSpec keeps of a workload's pod spec only what says which Secrets
// and ConfigMaps it consumes (inputs.Of reads exactly this): each container's
// name, envFrom and the env entries that reference a key, and the secret,
// configMap and projected volumes. Images, commands, probes and literal env
// values are what makes pod specs large.
func trimPodSpec(spec *corev1.PodSpec) {
	*spec = corev1.PodSpec{
		InitContainers: trimContainers(spec.InitContainers),
		Containers:     trimContainers(spec.Containers),
		Volumes:        configVolumes(spec.Volumes),
	}
}

func trimContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		var env []corev1.EnvVar
		for _, e := range c.Env {
			if e.ValueFrom != nil && (e.ValueFrom.SecretKeyRef != nil || e.ValueFrom.ConfigMapKeyRef != nil) {
				env = append(env, corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{
					SecretKeyRef: e.ValueFrom.SecretKeyRef, ConfigMapKeyRef: e.ValueFrom.ConfigMapKeyRef}})
			}
		}
		out[i] = corev1.Container{Name: c.Name, EnvFrom: c.EnvFrom, Env: env}
	}
	return out
}

func configVolumes(vs []corev1.Volume) []corev1.Volume {
	var out []corev1.Volume
	for _, v := range vs {
		src := v.VolumeSource
		if src.Secret != nil || src.ConfigMap != nil || src.Projected != nil {
			out = append(out, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				Secret: src.Secret, ConfigMap: src.ConfigMap, Projected: src.Projected}})
		}
	}
	return out
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
