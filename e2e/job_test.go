package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const keyReloadFinished = "courier.dev/reload-finished"

// createJob creates a Job consuming spec. One that finishes gets a pod the
// kwok node completes at once; one that does not, a pod no node takes, so
// it runs (active, Pending) until it is deleted. owner, if set, is its
// controller (a CronJob starting it). Annotation e2e.courier.dev/suspend:
// "true" creates it suspended.
func createJob(t *testing.T, ns, name string, annotations map[string]string, spec corev1.PodSpec, finishes bool, owner *metav1.OwnerReference) types.UID {
	t.Helper()
	spec = *spec.DeepCopy()
	spec.RestartPolicy = corev1.RestartPolicyNever
	if !finishes {
		spec.NodeSelector = map[string]string{"courier.dev/e2e": "nowhere"}
	}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
		Spec: batchv1.JobSpec{
			Suspend:      ptr.To(annotations["e2e.courier.dev/suspend"] == "true"),
			BackoffLimit: ptr.To[int32](0),
			Template:     corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: spec},
		},
	}
	if owner != nil {
		j.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	j, err := admin().BatchV1().Jobs(ns).Create(t.Context(), j, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Job %s/%s: %v", ns, name, err)
	}
	return j.UID
}

func getJob(ctx context.Context, ns, name string) (*batchv1.Job, error) {
	return admin().BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
}

// jobFinished reports whether Job ns/name has completed.
func jobFinished(ns, name string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		j, err := getJob(ctx, ns, name)
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}
}

// jobBaselined reports whether Job ns/name carries courier's baseline.
func jobBaselined(ns, name string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		j, err := getJob(ctx, ns, name)
		return err == nil && j.Annotations[keyInputs] != "", err
	}
}

// jobRecreated waits until Job ns/name is another one than *uid, recreated
// by courier for changed, and sets *uid to the new one's.
func jobRecreated(t *testing.T, ns, name string, uid *types.UID, changed string) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("Job %s/%s recreated for %s", ns, name, changed), func(ctx context.Context) (bool, error) {
		j, err := getJob(ctx, ns, name)
		if apierrors.IsNotFound(err) {
			return false, nil // between the delete and the create
		}
		if err != nil || j.UID == *uid {
			return false, err
		}
		if len(j.Spec.Template.Annotations[keyConfigHash]) != 64 || j.Annotations[keyReloadedFor] != changed {
			return false, fmt.Errorf("the new Job carries hash %q, reloaded-for %q", j.Spec.Template.Annotations[keyConfigHash], j.Annotations[keyReloadedFor])
		}
		*uid = j.UID
		return true, nil
	})
}

// jobInputs is courier's baseline on Job ns/name.
func jobInputs(t *testing.T, ns, name string) string {
	t.Helper()
	j, err := getJob(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return j.Annotations[keyInputs]
}

// jobKept reports whether Job ns/name is still the one with uid.
func jobKept(ns, name string, uid types.UID) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		j, err := getJob(ctx, ns, name)
		return err == nil && j.UID == uid, err
	}
}

// podsOfJob counts the pods of the Job with uid.
func podsOfJob(ctx context.Context, ns string, uid types.UID) (int, error) {
	pods, err := admin().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(uid)})
	if err != nil {
		return 0, err
	}
	return len(pods.Items), nil
}

// SPEC (Reload, Jobs): a Job that opts in itself is recreated — deleted with
// its pods and created again with the same spec and the new content — once
// per change of what it consumes; a finished one only with
// courier.dev/reload-finished: "true" (else a Normal JobFinished Event);
// a Job a CronJob started is never recreated (its CronJob's job template is
// patched, and nothing starts); a Job that does not opt in is left alone.
func TestAJobThatOptsInIsRecreatedOncePerChange(t *testing.T) {
	s := setupReplication(t)
	ns := s.target(t, "jobs", nil)
	ctx := t.Context()
	createConfigMap(t, ns, "settings", nil, map[string]string{"mode": "jobmode-one"})
	spec := podSpec([]corev1.EnvVar{keyRef("configmap", "settings", "mode")}, nil, nil)
	opt := map[string]string{keyReload: "true"}
	running := createJob(t, ns, "running", opt, spec, false, nil)
	finished := createJob(t, ns, "finished", opt, spec, true, nil)
	rerun := createJob(t, ns, "rerun", map[string]string{keyReload: "true", keyReloadFinished: "true"}, spec, true, nil)
	plain := createJob(t, ns, "plain", nil, spec, false, nil)
	// Opted in only by its input's own courier.dev/reload: not a Job's opt-in.
	createConfigMap(t, ns, "flagged", map[string]string{keyReload: "true"}, map[string]string{"mode": "jobmode-one"})
	byInput := createJob(t, ns, "by-input", nil, podSpec([]corev1.EnvVar{keyRef("configmap", "flagged", "mode")}, nil, nil), false, nil)
	// Suspended since its creation: never started, so nothing to recreate.
	waiting := createJob(t, ns, "waiting", map[string]string{keyReload: "true", "e2e.courier.dev/suspend": "true"}, spec, false, nil)
	cron, err := admin().BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Annotations: opt},
		Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *", JobTemplate: batchv1.JobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: opt},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: func() corev1.PodSpec {
				p := *spec.DeepCopy()
				p.RestartPolicy = corev1.RestartPolicyNever
				return p
			}()}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// As the CronJob controller (or kubectl create job --from=cronjob/…) makes one.
	started := createJob(t, ns, "nightly-manual", opt, spec, false, &metav1.OwnerReference{
		APIVersion: "batch/v1", Kind: "CronJob", Name: cron.Name, UID: cron.UID, Controller: ptr.To(true)})

	eventually(t, converge, "finished Job complete", jobFinished(ns, "finished"))
	eventually(t, converge, "rerun Job complete", jobFinished(ns, "rerun"))
	for _, name := range []string{"running", "finished", "rerun", "waiting"} {
		eventually(t, converge, "baseline on Job "+name, jobBaselined(ns, name))
	}
	finishedBaseline, waitingBaseline := jobInputs(t, ns, "finished"), jobInputs(t, ns, "waiting")
	oldPods, err := podsOfJob(ctx, ns, running)
	if err != nil || oldPods != 1 {
		t.Fatalf("the running Job has %d pods (%v), want 1", oldPods, err)
	}

	updateConfigMap(t, ns, "settings", func(cm *corev1.ConfigMap) { cm.Data["mode"] = "jobmode-two" })
	updateConfigMap(t, ns, "flagged", func(cm *corev1.ConfigMap) { cm.Data["mode"] = "jobmode-two" })
	old := running
	jobRecreated(t, ns, "running", &running, "configmap/settings")
	jobRecreated(t, ns, "rerun", &rerun, "configmap/settings")
	eventually(t, converge, "the old running Job's pods deleted", func(ctx context.Context) (bool, error) {
		n, err := podsOfJob(ctx, ns, old)
		return n == 0, err
	})
	eventually(t, converge, "the new running Job has its pod", func(ctx context.Context) (bool, error) {
		n, err := podsOfJob(ctx, ns, running)
		return n == 1, err
	})
	eventually(t, converge, "rerun ran again", jobFinished(ns, "rerun"))
	eventually(t, converge, "Reloaded on the new running Job", eventWith(ns, "running", "Reloaded", "recreated because configmap/settings changed"))
	eventually(t, converge, "JobFinished on the finished Job", eventWith(ns, "finished", "JobFinished", "configmap/settings changed", keyReloadFinished))
	eventually(t, converge, "the CronJob's job template patched", func(ctx context.Context) (bool, error) {
		cj, err := admin().BatchV1().CronJobs(ns).Get(ctx, "nightly", metav1.GetOptions{})
		return err == nil && len(cj.Spec.JobTemplate.Spec.Template.Annotations[keyConfigHash]) == 64, err
	})
	eventually(t, converge, "the suspended Job's baseline takes the change in", func(ctx context.Context) (bool, error) {
		j, err := getJob(ctx, ns, "waiting")
		return err == nil && j.Annotations[keyInputs] != waitingBaseline, err
	})
	consistently(t, quiet, "once per change; finished, plain, suspended, input-opted and CronJob-started Jobs kept", func(ctx context.Context) (bool, error) {
		for name, uid := range map[string]types.UID{"running": running, "rerun": rerun, "finished": finished, "plain": plain, "nightly-manual": started,
			"by-input": byInput, "waiting": waiting} {
			if ok, err := jobKept(ns, name, uid)(ctx); !ok || err != nil {
				return false, fmt.Errorf("Job %s is not the one with UID %s (%v)", name, uid, err)
			}
		}
		jobs, err := admin().BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(jobs.Items) == 7, err // the CronJob started nothing
	})
	if got := jobInputs(t, ns, "finished"); got != finishedBaseline {
		t.Errorf("the finished Job's baseline moved (%q, was %q): the change would be lost to a later %s", got, finishedBaseline, keyReloadFinished)
	}
	if j, _ := getJob(ctx, ns, "waiting"); j.Annotations[keyReloadedFor] != "" {
		t.Errorf("the suspended Job records a rollout: %v", j.Annotations)
	}
	for _, name := range []string{"plain", "nightly-manual", "by-input"} {
		if j, err := getJob(ctx, ns, name); err != nil || j.Annotations[keyInputs] != "" {
			t.Errorf("Job %s carries a baseline it should not: %v (%v)", name, j.Annotations, err)
		}
	}
	if j, _ := getJob(ctx, ns, "running"); j.Spec.Template.Labels["app"] != "running" || j.Spec.BackoffLimit == nil || *j.Spec.BackoffLimit != 0 {
		t.Errorf("the recreated Job lost its spec: labels %v, backoffLimit %v", j.Spec.Template.Labels, j.Spec.BackoffLimit)
	}
	s.courier.WaitMetricsExactly(ctx, map[string]float64{`courier_reloader_reloads_total{kind="Job",result="success"}`: 2})

	// The next change recreates them once more, and the finished one still not.
	updateConfigMap(t, ns, "settings", func(cm *corev1.ConfigMap) { cm.Data["mode"] = "jobmode-three" })
	jobRecreated(t, ns, "running", &running, "configmap/settings")
	jobRecreated(t, ns, "rerun", &rerun, "configmap/settings")
	consistently(t, quiet, "once per change", func(ctx context.Context) (bool, error) {
		for name, uid := range map[string]types.UID{"running": running, "rerun": rerun, "finished": finished} {
			if ok, err := jobKept(ns, name, uid)(ctx); !ok || err != nil {
				return false, fmt.Errorf("Job %s is not the one with UID %s (%v)", name, uid, err)
			}
		}
		return true, nil
	})
	s.courier.WaitMetricsExactly(ctx, map[string]float64{`courier_reloader_reloads_total{kind="Job",result="success"}`: 4})

	// A namespace whose quota the Job fills: the old one's delete makes
	// room for the new one (a dry run, counting both, would refuse it).
	capped := s.target(t, "jobs-quota", nil)
	if _, err := admin().CoreV1().ResourceQuotas(capped).Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "one-job"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/jobs.batch": resource.MustParse("1")}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, converge, "the quota counted", func(ctx context.Context) (bool, error) {
		q, err := admin().CoreV1().ResourceQuotas(capped).Get(ctx, "one-job", metav1.GetOptions{})
		return err == nil && q.Status.Hard != nil, err
	})
	createConfigMap(t, capped, "settings", nil, map[string]string{"mode": "jobmode-one"})
	only := createJob(t, capped, "only", opt, spec, false, nil)
	eventually(t, converge, "baseline on Job only", jobBaselined(capped, "only"))
	updateConfigMap(t, capped, "settings", func(cm *corev1.ConfigMap) { cm.Data["mode"] = "jobmode-two" })
	jobRecreated(t, capped, "only", &only, "configmap/settings")

	// A Job an admission policy will not let courier create again is never
	// deleted: the dry run is refused first, and the error logged.
	refusing := s.target(t, "jobs-refused", map[string]string{"jobs-refused": s.id})
	refuseRecreatedJobs(t, refusing, s.id)
	createConfigMap(t, refusing, "settings", nil, map[string]string{"mode": "jobmode-one"})
	kept := createJob(t, refusing, "kept", opt, spec, false, nil)
	eventually(t, converge, "baseline on Job kept", jobBaselined(refusing, "kept"))
	updateConfigMap(t, refusing, "settings", func(cm *corev1.ConfigMap) { cm.Data["mode"] = "jobmode-two" })
	eventually(t, 10*time.Second, "the refused dry run logged", func(context.Context) (bool, error) {
		return strings.Contains(s.courier.Logs(), "Job "+refusing+"/kept would not be created again (dry run), so it is left as it is"), nil
	})
	consistently(t, quiet, "the Job that cannot be created again is kept", jobKept(refusing, "kept", kept))
}

// refuseRecreatedJobs installs, until the test ends, an admission policy
// refusing to create a Job carrying courier.dev/reloaded-for in namespaces
// labelled jobs-refused=id, and waits until it refuses one in ns.
func refuseRecreatedJobs(t *testing.T, ns, id string) {
	t.Helper()
	ar := admin().AdmissionregistrationV1()
	name := "refuse-recreated-jobs-" + id
	fail := admissionv1.Deny
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: "!has(object.metadata.annotations) || !('" + keyReloadedFor + "' in object.metadata.annotations)",
				Message:    "no recreated Jobs here",
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{fail},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"jobs-refused": id}}},
		},
	}
	if _, err := ar.ValidatingAdmissionPolicies().Create(t.Context(), policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ar.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = ar.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := ar.ValidatingAdmissionPolicyBindings().Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	probe := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Annotations: map[string]string{keyReloadedFor: "secret/x"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}}}},
	}
	eventually(t, converge, "the policy refuses recreated Jobs", func(ctx context.Context) (bool, error) {
		_, err := admin().BatchV1().Jobs(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), nil
	})
}

// SPEC (Reload, Jobs; Compatibility): under --compat=reloader a Job with
// Reloader's annotations is recreated as Reloader does, and courier migrate
// maps them; --reload-all (Reloader's --auto-reload-all) rolls out other
// workloads but recreates no Job that does not opt in itself.
func TestReloaderAnnotationsRecreateAJobUnderCompat(t *testing.T) {
	s := setupReplication(t, "--compat=reloader", "--reload-all")
	ns := s.target(t, "jobs-compat", nil)
	createSecret(t, ns, "creds", withData("token", "jobtoken-one"))
	spec := podSpec([]corev1.EnvVar{keyRef("secret", "creds", "token")}, nil, nil)
	auto := createJob(t, ns, "auto", map[string]string{"reloader.stakater.com/auto": "true"}, spec, false, nil)
	quietJob := createJob(t, ns, "quiet", nil, spec, false, nil)
	createDeployment(t, ns, "app", nil, spec)
	settled(t, ns, "app")
	eventually(t, converge, "baseline on Job auto", jobBaselined(ns, "auto"))

	r := courierMigrate(t)
	found := false
	for _, o := range r.Objects {
		if o.Kind == "Job" && o.Namespace == ns && o.Name == "auto" {
			found = o.Add[keyReload] == "true"
		}
		if o.Kind == "Job" && o.Namespace == ns && o.Name == "quiet" {
			t.Errorf("courier migrate plans the Job without Reloader's annotations: %+v", o)
		}
	}
	if !found {
		t.Errorf("courier migrate does not map Reloader's auto on Job %s/auto to %s: \"true\"", ns, keyReload)
	}

	updateSecret(t, ns, "creds", func(x *corev1.Secret) { x.Data["token"] = []byte("jobtoken-two") })
	rolledOutOnce(t, ns, "app", 1, "secret/creds")
	jobRecreated(t, ns, "auto", &auto, "secret/creds")
	consistently(t, quiet, "the Job without opt-in kept under --reload-all; auto recreated once", func(ctx context.Context) (bool, error) {
		a, err1 := jobKept(ns, "auto", auto)(ctx)
		q, err2 := jobKept(ns, "quiet", quietJob)(ctx)
		return a && q, errors.Join(err1, err2)
	})
}

// SPEC (Reload, Jobs): a Job whose delete, sent to recreate it, has its
// answer lost (the API server deleted it; courier was told etcd timed out)
// is created again all the same, once, and told (before the fix: the Job
// was gone for good, with no Event).
func TestAJobWhoseDeleteAnswerIsLostIsRecreated(t *testing.T) {
	fp := newFaultProxy(t)
	ns := newNamespace(t, "lostjob", nil)
	createConfigMap(t, ns, "settings", nil, map[string]string{"mode": "jobmode-one"})
	uid := createJob(t, ns, "run", map[string]string{keyReload: "true"}, podSpec([]corev1.EnvVar{keyRef("configmap", "settings", "mode")}, nil, nil), false, nil)
	p := startCourierFrom(t, env.courier, courierIdentity(), nil, "--namespace="+ns,
		"--kubeconfig="+fp.kubeconfig(t, courierIdentity()), "--reload-debounce=100ms")
	p.WaitLeader(t.Context())
	eventually(t, converge, "baseline on the Job", jobBaselined(ns, "run"))
	fp.mu.Lock()
	fp.loseAnswer = func(r *http.Request) bool {
		return r.Method == http.MethodDelete && strings.HasSuffix(r.URL.Path, "/namespaces/"+ns+"/jobs/run")
	}
	fp.mu.Unlock()
	updateConfigMap(t, ns, "settings", func(cm *corev1.ConfigMap) { cm.Data["mode"] = "jobmode-two" })
	jobRecreated(t, ns, "run", &uid, "configmap/settings")
	fp.mu.Lock()
	lost := fp.lost
	fp.mu.Unlock()
	if lost != 1 {
		t.Fatalf("the proxy lost %d answers, want the delete's", lost)
	}
	eventually(t, converge, "Reloaded on the new Job", eventWith(ns, "run", "Reloaded", "recreated because configmap/settings changed"))
	consistently(t, quiet, "the new Job kept: recreated once", jobKept(ns, "run", uid))
	if n := eventCount(t, ns, "run", "JobNotRecreated"); n != 0 {
		t.Errorf("%d JobNotRecreated Events, want none", n)
	}
}
