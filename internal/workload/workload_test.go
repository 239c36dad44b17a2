package workload

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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
		Job:         &batchv1.Job{},
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

// A Job a CronJob started is its CronJob's business: no inputs, typed or
// cached, and the cache keeps nothing of its template. Finished says
// Complete or Failed, typed or cached.
func TestJobs(t *testing.T) {
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}}}}}
	job := func(owner string, conditions ...batchv1.JobCondition) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns"},
			Spec:   batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: spec}},
			Status: batchv1.JobStatus{Conditions: conditions}}
		if kind, controls := strings.CutSuffix(owner, "!"); owner != "" {
			j.OwnerReferences = []metav1.OwnerReference{{APIVersion: "x/v1", Kind: kind, Name: "o", UID: "u", Controller: ptr.To(controls)}}
		}
		return j
	}
	complete := batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}
	failed := batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}
	suspended := batchv1.JobCondition{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue}
	succeeding := batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue}
	failing := batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue}
	suspendedNew := job("")
	suspendedNew.Spec.Suspend = ptr.To(true)
	if c, _ := Cached(suspendedNew.DeepCopy()); !NeverStarted(suspendedNew) || !NeverStarted(c) {
		t.Error("a Job suspended since its creation has started")
	}
	suspendedNew.Status.StartTime = &metav1.Time{}
	if c, _ := Cached(suspendedNew.DeepCopy()); NeverStarted(suspendedNew) || NeverStarted(c) {
		t.Error("a suspended Job that ran once has never started")
	}
	for _, tc := range []struct {
		name                string
		job                 *batchv1.Job
		inputs              int
		finished, byCronJob bool
	}{
		{"running", job(""), 1, false, false},
		{"suspended", job("", suspended), 1, false, false},
		{"complete", job("", complete), 1, true, false},
		{"failed", job("", failed), 1, true, false},
		{"success criteria met", job("", succeeding), 1, true, false},
		{"failure target", job("", failing), 1, true, false},
		{"started by a CronJob", job(CronJob + "!"), 0, false, true},
		{"controlled by a JobSet", job("JobSet!"), 0, false, true},
		{"owned, not controlled", job("Workflow"), 1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cached, ok := Cached(tc.job.DeepCopy())
			if !ok {
				t.Fatal("not cached as an Object")
			}
			if got := len(Inputs(tc.job)); got != tc.inputs {
				t.Errorf("typed: %d inputs, want %d", got, tc.inputs)
			}
			if got := len(Inputs(cached)); got != tc.inputs {
				t.Errorf("cached: %d inputs, want %d", got, tc.inputs)
			}
			if Finished(tc.job) != tc.finished || Finished(cached) != tc.finished {
				t.Errorf("Finished = %v (typed), %v (cached); want %v", Finished(tc.job), Finished(cached), tc.finished)
			}
			if cached.Controlled != tc.byCronJob || (tc.byCronJob && cached.TemplateSum != 0) {
				t.Errorf("Controlled = %v, TemplateSum %d; want %v and no template kept", cached.Controlled, cached.TemplateSum, tc.byCronJob)
			}
			if NeverStarted(tc.job) || NeverStarted(cached) {
				t.Error("a Job not suspended has never started")
			}
			if cached.KindName() != Job {
				t.Errorf("KindName = %q", cached.KindName())
			}
		})
	}
}
