package workload

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestOfCoversEveryKind(t *testing.T) {
	objs := map[string]any{
		Deployment:  &appsv1.Deployment{},
		StatefulSet: &appsv1.StatefulSet{},
		DaemonSet:   &appsv1.DaemonSet{},
		CronJob:     &batchv1.CronJob{},
	}
	if len(objs) != len(Kinds) {
		t.Fatalf("test covers %d kinds, Kinds lists %d", len(objs), len(Kinds))
	}
	for _, kind := range Kinds {
		got, tmpl := Of(objs[kind])
		if got != kind || tmpl == nil {
			t.Errorf("Of(%s) = %q, %v", kind, got, tmpl)
		}
	}
	if kind, tmpl := Of(&corev1.Pod{}); kind != "" || tmpl != nil {
		t.Errorf("Of(Pod) = %q, %v; want nothing", kind, tmpl)
	}
	cj := &batchv1.CronJob{}
	if _, tmpl := Of(cj); tmpl != &cj.Spec.JobTemplate.Spec.Template {
		t.Errorf("a CronJob's template is not its job template's")
	}
}
