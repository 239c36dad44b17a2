// Package workload is the one list of the workload kinds courier reloads
// (Deployment, StatefulSet, DaemonSet, CronJob): their names, where each
// keeps its pod template, and the API call that patches one. Every other
// package asks here instead of switching on types of its own.
package workload

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Kind names.
const (
	Deployment  = "Deployment"
	StatefulSet = "StatefulSet"
	DaemonSet   = "DaemonSet"
	CronJob     = "CronJob"
)

// Kinds lists every workload kind, in a fixed order.
var Kinds = []string{Deployment, StatefulSet, DaemonSet, CronJob}

// Of returns the kind of a workload object and its pod template (for a
// CronJob, its job template's); "" and nil for any other object.
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
	}
	return "", nil
}

// TemplatePath is where kind keeps its pod template, as JSON field names
// from the object's root.
func TemplatePath(kind string) []string {
	if kind == CronJob {
		return []string{"spec", "jobTemplate", "spec", "template"}
	}
	return []string{"spec", "template"}
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
	}
	return err
}
