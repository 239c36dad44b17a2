package workload

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestHealth(t *testing.T) {
	three := int32(3)
	deployment := func(gen, observed int64, updated, total, available int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Spec: appsv1.DeploymentSpec{Replicas: &three},
			Status: appsv1.DeploymentStatus{ObservedGeneration: observed, UpdatedReplicas: updated, Replicas: total, AvailableReplicas: available, Conditions: conds}}
	}
	partition := func(p int32) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.StatefulSetSpec{Replicas: &three,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &p}}},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, UpdatedReplicas: 3 - p, ReadyReplicas: 3, CurrentRevision: "a", UpdateRevision: "b"}}
		return s
	}
	rollout := func(gen int64, observed, phase string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"observedGeneration": observed, "phase": phase}}}
		u.SetGeneration(gen)
		return u
	}
	deadline := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}
	progressing := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"}
	for _, tc := range []struct {
		name string
		obj  any
		want Health
	}{
		{"Deployment done", deployment(2, 2, 3, 3, 3, progressing), Healthy},
		{"Deployment's new generation not seen yet", deployment(3, 2, 3, 3, 3, progressing), Progressing},
		{"Deployment with replicas still to update", deployment(2, 2, 1, 3, 3), Progressing},
		{"Deployment with old replicas left", deployment(2, 2, 3, 4, 3), Progressing},
		{"Deployment with updated replicas not available", deployment(2, 2, 3, 3, 2), Progressing},
		{"Deployment past its progress deadline", deployment(2, 2, 1, 3, 2, deadline), Failed},
		{"StatefulSet done", &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Spec: appsv1.StatefulSetSpec{Replicas: &three},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, UpdatedReplicas: 3, ReadyReplicas: 3, CurrentRevision: "b", UpdateRevision: "b"}}, Healthy},
		{"StatefulSet not all on the update revision", &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Spec: appsv1.StatefulSetSpec{Replicas: &three},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, UpdatedReplicas: 3, ReadyReplicas: 3, CurrentRevision: "a", UpdateRevision: "b"}}, Progressing},
		{"StatefulSet with a replica not ready", &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Spec: appsv1.StatefulSetSpec{Replicas: &three},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, UpdatedReplicas: 3, ReadyReplicas: 2, CurrentRevision: "b", UpdateRevision: "b"}}, Progressing},
		{"StatefulSet with a partition: done when those above it are", partition(1), Healthy},
		{"StatefulSet updated on delete: done once its controller saw the template", &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Spec:   appsv1.StatefulSetSpec{Replicas: &three, UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, UpdatedReplicas: 0, ReadyReplicas: 3, CurrentRevision: "a", UpdateRevision: "b"}}, Healthy},
		{"DaemonSet done", &appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 2}}, Healthy},
		{"DaemonSet with a node not updated", &appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, UpdatedNumberScheduled: 1, NumberAvailable: 2}}, Progressing},
		{"DaemonSet updated on delete", &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}},
			Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, UpdatedNumberScheduled: 0, NumberAvailable: 2}}, Healthy},
		{"Rollout Healthy", rollout(4, "4", "Healthy"), Healthy},
		{"Rollout Healthy at a generation before", rollout(5, "4", "Healthy"), Progressing},
		{"Rollout Degraded", rollout(4, "4", "Degraded"), Failed},
		{"Rollout Paused", rollout(4, "4", "Paused"), Progressing},
	} {
		var got Health
		if u, ok := tc.obj.(*unstructured.Unstructured); ok {
			got = rolloutHealth(u)
		} else {
			got = HealthOf(tc.obj)
			if c, ok := Cached(tc.obj); !ok || c.Health != got {
				t.Errorf("%s: the cached form's health is not %s", tc.name, got)
			}
		}
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
