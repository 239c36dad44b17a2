package reloader

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/courier-k8s/courier/internal/wellknown"
)

// The Job that replaces another is its owner's spec and metadata, without
// what the API server and the Job controller generated, with courier's
// record and hash.
func TestSuccessor(t *testing.T) {
	generated := map[string]string{
		"app": "x", batchv1.ControllerUidLabel: "u1", batchv1.JobNameLabel: "j", "controller-uid": "u1", "job-name": "j",
	}
	live := func(manual bool) *batchv1.Job {
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{
				Name: "j", Namespace: "ns", UID: "u1", ResourceVersion: "9", Generation: 2,
				CreationTimestamp: metav1.Now(), Labels: generated,
				Annotations:     map[string]string{"team": "a", wellknown.ReloadedFor: "secret/old"},
				OwnerReferences: []metav1.OwnerReference{{Kind: "Workflow", Name: "w", UID: "o"}},
			},
			Spec: batchv1.JobSpec{
				Parallelism:    ptr.To[int32](2),
				Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: "u1"}},
				ManualSelector: ptr.To(manual),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: generated, Annotations: map[string]string{"note": "n"}},
					Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
				},
			},
			Status: batchv1.JobStatus{Active: 1},
		}
		return j
	}
	record := map[string]any{wellknown.ConfigInputs: "secret/db=1", wellknown.ReloadedFor: "secret/db", "gone": nil}

	got := successor(live(false), record, "h2")
	want := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "j", Namespace: "ns", Labels: map[string]string{"app": "x"},
			Annotations:     map[string]string{"team": "a", wellknown.ConfigInputs: "secret/db=1", wellknown.ReloadedFor: "secret/db"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Workflow", Name: "w", UID: "o"}},
		},
		Spec: batchv1.JobSpec{
			Parallelism:    ptr.To[int32](2),
			ManualSelector: ptr.To(false),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"note": "n", wellknown.ConfigHash: "h2"}},
				Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("successor (-want +got):\n%s", diff)
	}

	// The owner's own selector (spec.manualSelector) and its labels stay.
	manual := successor(live(true), record, "h2")
	if manual.Spec.Selector == nil || manual.Spec.Template.Labels[batchv1.ControllerUidLabel] != "u1" {
		t.Errorf("a manual selector was not kept: %v, %v", manual.Spec.Selector, manual.Spec.Template.Labels)
	}

	// The live Job is not changed.
	l := live(false)
	successor(l, record, "h2")
	if diff := cmp.Diff(live(false).Spec, l.Spec); diff != "" || l.Labels[batchv1.JobNameLabel] != "j" {
		t.Errorf("successor changed the live Job: %s", diff)
	}
}
