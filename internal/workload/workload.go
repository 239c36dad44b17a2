// Package workload is the one list of the workload kinds courier reloads
// (Deployment, StatefulSet, DaemonSet, CronJob, Job): their names, where
// each keeps its pod template, and the API call that patches one. Every other
// package asks here instead of switching on types of its own.
package workload

import (
	"context"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/courier-k8s/courier/internal/inputs"
	"github.com/courier-k8s/courier/internal/stakater"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// Kind names.
const (
	Deployment  = "Deployment"
	StatefulSet = "StatefulSet"
	DaemonSet   = "DaemonSet"
	CronJob     = "CronJob"
	// Job: reloaded by recreating it (its pod template cannot change), and
	// only when it opts in itself; a Job with a controller (a CronJob, a
	// JobSet) is never reloaded (its controller is the workload).
	Job = "Job"
)

// Kinds lists every workload kind, in a fixed order.
var Kinds = []string{Deployment, StatefulSet, DaemonSet, CronJob, Job}

// resources are the built-in kinds' API resources.
var resources = map[string]schema.GroupVersionResource{
	Deployment:  {Group: "apps", Version: "v1", Resource: "deployments"},
	StatefulSet: {Group: "apps", Version: "v1", Resource: "statefulsets"},
	DaemonSet:   {Group: "apps", Version: "v1", Resource: "daemonsets"},
	CronJob:     {Group: "batch", Version: "v1", Resource: "cronjobs"},
	Job:         {Group: "batch", Version: "v1", Resource: "jobs"},
}

// BuiltIn is the API resource of a built-in kind.
func BuiltIn(kind string) (schema.GroupVersionResource, bool) {
	r, ok := resources[kind]
	return r, ok
}

// Of returns the kind of a typed workload object, as the API serves it, and
// its pod template (for a CronJob, its job template's); "" and nil for any
// other object, the cached form (Object) included.
func Of(obj any) (kind string, template *corev1.PodTemplateSpec) {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		return Deployment, &w.Spec.Template
	case *appsv1.StatefulSet:
		return StatefulSet, &w.Spec.Template
	case *appsv1.DaemonSet:
		return DaemonSet, &w.Spec.Template
	case *batchv1.CronJob:
		return CronJob, &w.Spec.JobTemplate.Spec.Template
	case *batchv1.Job:
		return Job, &w.Spec.Template
	}
	return "", nil
}

// Controlled reports whether Job m has a controller (a CronJob that
// started it, a JobSet): such a Job is never reloaded itself, for its
// controller owns its life (a CronJob's job template is reloaded, for the
// Jobs it starts next).
func Controlled(m metav1.Object) bool {
	return metav1.GetControllerOf(m) != nil
}

// NeverStarted reports whether a Job is suspended and has never started
// (no status.startTime): no pod of it has read its inputs, so a change
// needs no recreation. (A Job not suspended may have pods before its
// startTime is written: it counts as started.)
func NeverStarted(obj any) bool {
	switch w := obj.(type) {
	case *Object:
		return w.NeverStarted
	case *batchv1.Job:
		return w.Spec.Suspend != nil && *w.Spec.Suspend && w.Status.StartTime == nil
	}
	return false
}

// Finished reports whether a Job has finished (Complete or Failed, or
// about to be: SuccessCriteriaMet, FailureTarget); false
// for any other object. A finished Job is recreated only when it asks to be
// (courier.dev/reload-finished: "true").
func Finished(obj any) bool {
	switch w := obj.(type) {
	case *Object:
		return w.Finished
	case *batchv1.Job:
		for _, c := range w.Status.Conditions {
			switch c.Type {
			case batchv1.JobComplete, batchv1.JobFailed, batchv1.JobSuccessCriteriaMet, batchv1.JobFailureTarget:
				// The last two: the Job has met its end, its pods are
				// terminating (Kubernetes 1.31 and later).
				if c.Status == corev1.ConditionTrue {
					return true
				}
			}
		}
	}
	return false
}

// KindOf is the kind of a workload, typed or cached (Object); "" for any
// other object.
func KindOf(obj any) string {
	if o, ok := obj.(*Object); ok {
		return o.KindName()
	}
	kind, _ := Of(obj)
	return kind
}

// TemplateAnnotations are a workload's pod template annotations, typed or
// cached; nil without a template.
func TemplateAnnotations(obj any) map[string]string {
	if o, ok := obj.(*Object); ok {
		return o.TemplateAnnotations.Map()
	}
	if _, t := Of(obj); t != nil {
		return t.Annotations
	}
	return nil
}

// Inputs is what a workload consumes: what its pod template references, or,
// for a custom resource without one, what its courier.dev/reload-on names
// (a Rollout with spec.workloadRef has none of its own: its Deployment's
// template says).
func Inputs(obj any) []inputs.Ref {
	if o, ok := obj.(*Object); ok {
		switch {
		case o.Unreadable || o.Controlled:
			return nil
		case !o.Templated:
			return inputs.RefsOf(o.GetAnnotations()[wellknown.ReloadOn])
		}
		return WithNamed(o.Refs, o.GetAnnotations(), o.TemplateAnnotations.Map())
	}
	if kind, t := Of(obj); t != nil {
		m := obj.(metav1.Object)
		if kind == Job && Controlled(m) {
			return nil
		}
		return WithNamed(inputs.Of(&t.Spec), m.GetAnnotations(), t.Annotations)
	}
	return nil
}

// WithNamed is refs, what a pod template references, and the objects the
// workload's annotations name that it does not reference: those of
// courier.dev/reload-on, and the plain names (not patterns) in Reloader's
// reload lists (honoured only under --compat=reloader: the reloader
// decides). Each named one is read whole and optional (Ref.Named).
func WithNamed(refs []inputs.Ref, annotations, template map[string]string) []inputs.Ref {
	var named []inputs.Ref
	have := func(kind, name string) bool {
		for _, r := range refs {
			if r.Kind == kind && r.Name == name {
				return true
			}
		}
		for _, r := range named {
			if r.Kind == kind && r.Name == name {
				return true
			}
		}
		return false
	}
	for _, r := range inputs.RefsOf(annotations[wellknown.ReloadOn]) {
		if !have(r.Kind, r.Name) {
			r.Optional, r.Named = true, wellknown.ReloadOn
			named = append(named, r)
		}
	}
	for _, kind := range []string{wellknown.KindSecret, wellknown.KindConfigMap} {
		key := stakater.TypedReload(kind)
		for _, name := range strings.Split(stakater.Annotations(kind, annotations, template)[key], ",") {
			name = strings.TrimSpace(name)
			if name != "" && len(validation.IsDNS1123Subdomain(name)) == 0 && !have(kind, name) {
				named = append(named, inputs.Ref{Kind: kind, Name: name, Optional: true, Named: key})
			}
		}
	}
	if len(named) == 0 {
		return refs
	}
	out := append(slices.Clone(refs), named...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

// RefOf is the Deployment a Rollout takes its pod template from
// (spec.workloadRef), or "".
func RefOf(obj any) string {
	if o, ok := obj.(*Object); ok {
		return o.WorkloadRef
	}
	return ""
}

// HashOf is the courier.dev/config-hash the workload holds now.
func HashOf(obj any) string {
	if o, ok := obj.(*Object); ok {
		return o.Hash
	}
	if _, t := Of(obj); t != nil {
		return t.Annotations[wellknown.ConfigHash]
	}
	return ""
}

// HashPath is where a built-in kind keeps courier.dev/config-hash: its pod
// template's annotations, as JSON field names from the object's root.
func HashPath(kind string) []string {
	if kind == CronJob {
		return []string{"spec", "jobTemplate", "spec", "template", "metadata", "annotations"}
	}
	return []string{"spec", "template", "metadata", "annotations"}
}

// Patch sends a patch of type pt to the workload kind namespace/name.
func Patch(ctx context.Context, client kubernetes.Interface, kind, namespace, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) error {
	var err error
	switch kind {
	case Deployment:
		_, err = client.AppsV1().Deployments(namespace).Patch(ctx, name, pt, data, opts)
	case StatefulSet:
		_, err = client.AppsV1().StatefulSets(namespace).Patch(ctx, name, pt, data, opts)
	case DaemonSet:
		_, err = client.AppsV1().DaemonSets(namespace).Patch(ctx, name, pt, data, opts)
	case CronJob:
		_, err = client.BatchV1().CronJobs(namespace).Patch(ctx, name, pt, data, opts)
	case Job:
		_, err = client.BatchV1().Jobs(namespace).Patch(ctx, name, pt, data, opts)
	}
	return err
}
