package reloader

import (
	"context"
	"encoding/json"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/courier-k8s/courier/internal/wellknown"
)

// Workload kinds, the first field of every queue key.
const (
	kindDeployment  = "Deployment"
	kindStatefulSet = "StatefulSet"
	kindDaemonSet   = "DaemonSet"
	kindCronJob     = "CronJob"
)

// key names one workload.
type key struct {
	Kind, Namespace, Name string
}

func (k key) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// patch is the merge patch the reloader sends: courier's annotations on the
// workload and, for a rollout, courier.dev/config-hash on the pod template.
// resourceVersion makes it apply only to the workload that was looked at.
func patch(kind, resourceVersion string, annotations map[string]string, configHash string) ([]byte, error) {
	p := map[string]any{"metadata": map[string]any{"resourceVersion": resourceVersion, "annotations": annotations}}
	if configHash != "" {
		template := map[string]any{"metadata": map[string]any{"annotations": map[string]string{wellknown.ConfigHash: configHash}}}
		if kind == kindCronJob {
			p["spec"] = map[string]any{"jobTemplate": map[string]any{"spec": map[string]any{"template": template}}}
		} else {
			p["spec"] = map[string]any{"template": template}
		}
	}
	return json.Marshal(p)
}

// apply sends a merge patch to the workload k with field manager courier.
func apply(ctx context.Context, client kubernetes.Interface, k key, data []byte) error {
	opts := metav1.PatchOptions{FieldManager: wellknown.FieldManager}
	var err error
	switch k.Kind {
	case kindDeployment:
		_, err = client.AppsV1().Deployments(k.Namespace).Patch(ctx, k.Name, types.MergePatchType, data, opts)
	case kindStatefulSet:
		_, err = client.AppsV1().StatefulSets(k.Namespace).Patch(ctx, k.Name, types.MergePatchType, data, opts)
	case kindDaemonSet:
		_, err = client.AppsV1().DaemonSets(k.Namespace).Patch(ctx, k.Name, types.MergePatchType, data, opts)
	case kindCronJob:
		_, err = client.BatchV1().CronJobs(k.Namespace).Patch(ctx, k.Name, types.MergePatchType, data, opts)
	}
	return err
}

// kindOf names a workload object's kind ("" for anything else).
func kindOf(obj any) string {
	switch obj.(type) {
	case *appsv1.Deployment:
		return kindDeployment
	case *appsv1.StatefulSet:
		return kindStatefulSet
	case *appsv1.DaemonSet:
		return kindDaemonSet
	case *batchv1.CronJob:
		return kindCronJob
	}
	return ""
}
