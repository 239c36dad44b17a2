package reloader

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
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

// A Job deleted to be recreated: created again when the name is free, kept
// pending (with a Warning) while the create is refused, and given up when
// someone else's Job holds the name — or taken as created when the Job
// there is the one courier created (an answer lost).
func TestCreatePending(t *testing.T) {
	next := func(hash string) *batchv1.Job {
		return &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns"},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
				Annotations: map[string]string{wellknown.ConfigHash: hash}}}}}
	}
	k := key{Kind: "Job", Namespace: "ns", Name: "j"}
	for _, tc := range []struct {
		name        string
		there       *batchv1.Job // a Job of that name already
		refuse      bool         // creates are forbidden
		created     bool
		stillQueued bool
		warning     bool
	}{
		{name: "name free", created: true},
		{name: "refused", refuse: true, stillQueued: true, warning: true},
		{name: "someone else's", there: next("theirs")},
		{name: "ours, answer lost", there: next("ours"), created: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.there != nil {
				objs = append(objs, tc.there)
			}
			f := newFixture(t, Options{}, objs...)
			if tc.refuse {
				f.client.PrependReactor("create", "jobs", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(batchv1.Resource("jobs"), "j", fmt.Errorf("denied by a policy"))
				})
			}
			f.c.pendingJobs[k] = pendingJob{next: next("ours"), old: "the-deleted-one"}
			got, err := f.c.createPending(t.Context(), k)
			if (got != nil) != tc.created || (err != nil) != tc.stillQueued || f.c.hasPending(k) != tc.stillQueued {
				t.Errorf("created %v, err %v, pending %v; want created %v, pending %v", got != nil, err, f.c.hasPending(k), tc.created, tc.stillQueued)
			}
			warned := false
			for len(f.recorder.Events) > 0 {
				if e := <-f.recorder.Events; strings.Contains(e, wellknown.ReasonJobNotRecreated) {
					warned = true
				}
			}
			if warned != tc.warning {
				t.Errorf("JobNotRecreated Event: %v, want %v", warned, tc.warning)
			}
		})
	}
}

// A Job's delete whose answer is lost (etcd timed out and committed it, the
// connection broke) leaves the Job pending: the next try creates it when
// the delete was applied (before the fix: the Job was lost), and when it
// was not, finds the old Job still there, forgets the recreation and asks
// for a fresh decision (a conflict), leaving the old Job as it is.
func TestARecreateWhoseDeleteAnswerIsLost(t *testing.T) {
	for _, applied := range []bool{true, false} {
		t.Run(fmt.Sprintf("applied=%t", applied), func(t *testing.T) {
			old := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "old", ResourceVersion: "5"}}
			f := newFixture(t, Options{}, old)
			k := key{Kind: "Job", Namespace: "ns", Name: "j"}
			f.client.PrependReactor("create", "jobs", func(a clienttesting.Action) (bool, runtime.Object, error) {
				c := a.(clienttesting.CreateActionImpl)
				return len(c.CreateOptions.DryRun) > 0, c.Object, nil // the fake stores dry runs
			})
			f.client.PrependReactor("delete", "jobs", func(clienttesting.Action) (bool, runtime.Object, error) {
				if applied {
					if err := f.client.Tracker().Delete(batchv1.SchemeGroupVersion.WithResource("jobs"), "ns", "j"); err != nil {
						return true, nil, err
					}
				}
				return true, nil, apierrors.NewTimeoutError("request did not complete within requested timeout", 0)
			})
			if _, err := f.c.recreate(t.Context(), k, old, nil, "new"); !apierrors.IsTimeout(err) {
				t.Fatalf("recreate: %v, want the delete's timeout", err)
			}
			if !f.c.hasPending(k) {
				t.Fatal("a Job whose delete failed is not pending")
			}
			created, err := f.c.createPending(t.Context(), k)
			if f.c.hasPending(k) {
				t.Error("still pending after the next try")
			}
			there, getErr := f.client.BatchV1().Jobs("ns").Get(t.Context(), "j", metav1.GetOptions{})
			if getErr != nil {
				t.Fatal(getErr)
			}
			if applied {
				if err != nil || created == nil || there.Spec.Template.Annotations[wellknown.ConfigHash] != "new" {
					t.Errorf("created %v, %v; the Job there has hash %q: want it created with hash new", created != nil, err, there.Spec.Template.Annotations[wellknown.ConfigHash])
				}
				return
			}
			if !apierrors.IsConflict(err) || created != nil || there.UID != "old" {
				t.Errorf("created %v, %v; the Job there is %s: want a conflict and the old Job kept", created != nil, err, there.UID)
			}
		})
	}
}
