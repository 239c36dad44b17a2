package e2e

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const (
	keyReload      = "courier.dev/reload"
	keyReloadOn    = "courier.dev/reload-on"
	keyConfigHash  = "courier.dev/config-hash"
	keyReloadedFor = "courier.dev/reloaded-for"
	keyInputs      = "courier.dev/config-inputs"
	// quiet is how long a test watches for a rollout that must not happen:
	// longer than the default --reload-debounce (2 s).
	quiet = 3500 * time.Millisecond
)

func keyRef(kind, name, key string) corev1.EnvVar {
	src := &corev1.EnvVarSource{}
	if kind == "secret" {
		src.SecretKeyRef = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}
	} else {
		src.ConfigMapKeyRef = &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}
	}
	return corev1.EnvVar{Name: strings.ToUpper(strings.ReplaceAll(name+"_"+key, "-", "_")), ValueFrom: src}
}

func podSpec(env []corev1.EnvVar, envFrom []corev1.EnvFromSource, volumes []corev1.Volume) corev1.PodSpec {
	return corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1", Env: env, EnvFrom: envFrom}},
		Volumes:    volumes,
	}
}

func createDeployment(t *testing.T, ns, name string, annotations map[string]string, spec corev1.PodSpec) {
	t.Helper()
	createDeploymentWithTemplate(t, ns, name, annotations, nil, spec)
}

// createDeploymentWithTemplate is createDeployment with annotations on the
// pod template too.
func createDeploymentWithTemplate(t *testing.T, ns, name string, annotations, templateAnnotations map[string]string, spec corev1.PodSpec) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: templateAnnotations}, Spec: spec},
		},
	}
	if _, err := admin().AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment %s/%s: %v", ns, name, err)
	}
}

// replicaSets counts a Deployment's ReplicaSets: one per pod template it
// ever ran (up to its revision history), so each rollout adds one. Its
// generation is no measure: Deployments bump it on annotation changes too.
func replicaSets(ctx context.Context, ns, name string) (int, error) {
	rss, err := admin().AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return 0, err
	}
	return len(rss.Items), nil
}

// settled waits until the Deployment runs its first ReplicaSet and courier
// has recorded its baseline (first sight), and returns the ReplicaSet count.
func settled(t *testing.T, ns, name string) int {
	t.Helper()
	eventually(t, converge, "first ReplicaSet and baseline on "+ns+"/"+name, func(ctx context.Context) (bool, error) {
		d, err := admin().AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || d.Annotations[keyInputs] == "" {
			return false, err
		}
		n, err := replicaSets(ctx, ns, name)
		return n == 1, err
	})
	return 1
}

// seenAll waits until courier has seen every workload already in ns: it
// creates one more, opted in, and waits for its baseline. A watch delivers
// events in order, so courier's cache then holds every earlier workload.
func seenAll(t *testing.T, ns string) {
	t.Helper()
	createSecret(t, ns, "seen-all", withData("k", "1"))
	createDeployment(t, ns, "seen-all", map[string]string{keyReload: "true"}, podSpec([]corev1.EnvVar{keyRef("secret", "seen-all", "k")}, nil, nil))
	settled(t, ns, "seen-all")
}

// unsettled waits only for the first ReplicaSet (a workload courier ignores).
func unsettled(t *testing.T, ns, name string) int {
	t.Helper()
	eventually(t, converge, "first ReplicaSet of "+ns+"/"+name, func(ctx context.Context) (bool, error) {
		n, err := replicaSets(ctx, ns, name)
		return n == 1, err
	})
	return 1
}

func rolledOutOnce(t *testing.T, ns, name string, before int, changed string) {
	t.Helper()
	eventually(t, 10*time.Second, "rollout of "+ns+"/"+name, func(ctx context.Context) (bool, error) {
		n, err := replicaSets(ctx, ns, name)
		return n > before, err
	})
	d, err := admin().AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Spec.Template.Annotations[keyConfigHash]) != 64 {
		t.Errorf("pod template %s = %q, want a sha256", keyConfigHash, d.Spec.Template.Annotations[keyConfigHash])
	}
	if got := d.Annotations[keyReloadedFor]; got != changed {
		t.Errorf("%s = %q, want %q", keyReloadedFor, got, changed)
	}
	noRollout(t, ns, name, before+1)
}

func noRollout(t *testing.T, ns, name string, want int) {
	t.Helper()
	consistently(t, quiet, fmt.Sprintf("%s/%s keeps %d ReplicaSet(s)", ns, name, want), func(ctx context.Context) (bool, error) {
		n, err := replicaSets(ctx, ns, name)
		return n == want, err
	})
}

func TestClassicRecipeSourceChangeRollsOutEveryConsumerOfItsReplicas(t *testing.T) {
	s := setupReplication(t)
	var targets []string
	for range 2 {
		targets = append(targets, s.target(t, "app", nil))
	}
	createSecret(t, s.src, "blogsecret", withAnnotation(keyReplicateTo, "test="+s.id), withAnnotation(keyReload, "true"),
		withData("password", "v1"), withData("user", "blog"))
	gens := map[string]int{}
	for _, ns := range targets {
		eventually(t, converge, "replica", secretIn(ns, "blogsecret", map[string][]byte{"password": []byte("v1"), "user": []byte("blog")}))
		createDeployment(t, ns, "blog", nil, podSpec([]corev1.EnvVar{keyRef("secret", "blogsecret", "password")}, nil, nil))
		gens[ns] = settled(t, ns, "blog")
	}
	for _, ns := range targets {
		noRollout(t, ns, "blog", gens[ns]) // first sight: no rollout
	}

	updateSecret(t, s.src, "blogsecret", func(x *corev1.Secret) { x.Data["password"] = []byte("v2") })
	for _, ns := range targets {
		rolledOutOnce(t, ns, "blog", gens[ns], "secret/blogsecret")
		eventually(t, converge, "Reloaded event", eventWith(ns, "blog", "Reloaded", "secret/blogsecret"))
	}
	// The rollout really happens: a new ReplicaSet's pod becomes Ready on the kwok node.
	eventually(t, 30*time.Second, "rollout complete", func(ctx context.Context) (bool, error) {
		d, err := admin().AppsV1().Deployments(targets[0]).Get(ctx, "blog", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == 1 && d.Status.AvailableReplicas == 1 && d.Status.Replicas == 1, nil
	})

	// A key the workload does not consume: no rollout.
	updateSecret(t, s.src, "blogsecret", func(x *corev1.Secret) { x.Data["user"] = []byte("other") })
	noRollout(t, targets[0], "blog", gens[targets[0]]+1)
}

func TestOptInPathsAndConsumptionForms(t *testing.T) {
	s := setupReplication(t)
	ns := s.target(t, "apps", nil)
	mk := func(name string, opts ...secretOpt) {
		createSecret(t, ns, name, append([]secretOpt{withData("a", "1"), withData("b", "1")}, opts...)...)
	}
	mk("plain")
	mk("flagged", withAnnotation(keyReload, "true"))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"a": "1"}}
	if _, err := admin().CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	envFrom := func(name string) []corev1.EnvFromSource {
		return []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}
	}
	tests := []struct {
		name        string
		annotations map[string]string
		spec        corev1.PodSpec
		change      string // "secret/<name>" or "configmap/settings"
		want        bool
	}{
		{"workload reload=true, envFrom", map[string]string{keyReload: "true"}, podSpec(nil, envFrom("plain"), nil), "secret/plain", true},
		{"reload-on names it, projected volume", map[string]string{keyReloadOn: "configmap/settings, secret/nothing"},
			podSpec(nil, nil, []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}}}}}),
			"configmap/settings", true},
		{"secret has reload=true, initContainer keyRef", nil, func() corev1.PodSpec {
			p := podSpec(nil, nil, nil)
			p.InitContainers = []corev1.Container{{Name: "init", Image: "x", Env: []corev1.EnvVar{keyRef("secret", "flagged", "a")}}}
			return p
		}(), "secret/flagged", true},
		{"workload reload=false opts out", map[string]string{keyReload: "false"}, podSpec(nil, envFrom("flagged"), nil), "secret/flagged", false},
		{"no opt-in anywhere", nil, podSpec(nil, envFrom("plain"), nil), "secret/plain", false},
		{"volume items: an unlisted key", map[string]string{keyReload: "true"},
			podSpec(nil, nil, []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "plain", Items: []corev1.KeyToPath{{Key: "b", Path: "b"}}}}}}),
			"secret/plain", false},
	}
	gens := map[string]int{}
	for i, tt := range tests {
		name := fmt.Sprintf("w%d", i)
		createDeployment(t, ns, name, tt.annotations, tt.spec)
		if tt.annotations[keyReload] == "true" || tt.want {
			gens[name] = settled(t, ns, name)
		} else {
			gens[name] = unsettled(t, ns, name)
		}
	}
	seenAll(t, ns) // else a case that must not roll out could pass by courier not having seen it yet
	// Change key "a" of every input.
	updateSecret(t, ns, "plain", func(x *corev1.Secret) { x.Data["a"] = []byte("2") })
	updateSecret(t, ns, "flagged", func(x *corev1.Secret) { x.Data["a"] = []byte("2") })
	c, _ := admin().CoreV1().ConfigMaps(ns).Get(t.Context(), "settings", metav1.GetOptions{})
	c.Data["a"] = "2"
	if _, err := admin().CoreV1().ConfigMaps(ns).Update(t.Context(), c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("w%d", i)
			if tt.want {
				rolledOutOnce(t, ns, name, gens[name], tt.change)
			} else {
				noRollout(t, ns, name, gens[name])
				d, _ := admin().AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
				if d.Spec.Template.Annotations[keyConfigHash] != "" {
					t.Errorf("pod template got %s", keyConfigHash)
				}
			}
		})
	}
}

func TestChangesWithinTheDebounceGiveOneRollout(t *testing.T) {
	s := setupReplication(t)
	ns := s.target(t, "apps", nil)
	var env []corev1.EnvVar
	for i := range 3 {
		name := fmt.Sprintf("s%d", i)
		createSecret(t, ns, name, withData("k", "1"))
		env = append(env, keyRef("secret", name, "k"))
	}
	createDeployment(t, ns, "app", map[string]string{keyReload: "true"}, podSpec(env, nil, nil))
	g0 := settled(t, ns, "app")
	start := time.Now()
	for i := range 3 {
		updateSecret(t, ns, fmt.Sprintf("s%d", i), func(x *corev1.Secret) { x.Data["k"] = []byte("2") })
		if i < 2 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	// The window opens at the first change: on a machine so slow that the
	// three updates took longer than it, each window they spanned may roll
	// out once.
	const debounce = 2 * time.Second
	if took := time.Since(start); took >= debounce {
		most := min(3, 1+int((took+debounce-1)/debounce))
		t.Logf("the three updates took %s, longer than the 2 s debounce: up to %d rollouts allowed", took, most)
		time.Sleep(debounce + quiet)
		if n, err := replicaSets(t.Context(), ns, "app"); err != nil || n < g0+1 || n > g0+most {
			t.Errorf("%d ReplicaSets (%v), want %d to %d", n, err, g0+1, g0+most)
		}
		return
	}
	rolledOutOnce(t, ns, "app", g0, "secret/s0, secret/s1, secret/s2")
}

// SPEC (coalescing): the changes within --reload-debounce of the first give
// one rollout, even when a new leader's term begins in between: its first
// sync of every workload comes at once, and must still wait for the rest
// of the window the standby saw open (before the fix: the first change
// rolled out at the handover and the second one again).
func TestChangesWithinTheDebounceGiveOneRolloutAcrossAHandover(t *testing.T) {
	const debounce = 6 * time.Second
	ns := newNamespace(t, "burst", nil)
	lease := newNamespace(t, "courier-burst", nil)
	createSecret(t, ns, "cfg", withData("k", "1"))
	createDeployment(t, ns, "app", map[string]string{keyReload: "true"}, podSpec([]corev1.EnvVar{keyRef("secret", "cfg", "k")}, nil, nil))
	args := []string{"--namespace=" + lease, "--reload-debounce=" + debounce.String(),
		"--lease-duration=6s", "--renew-deadline=2s", "--retry-period=200ms"}
	a := startCourier(t, args...)
	eventually(t, 30*time.Second, "first courier leads", a.isLeader)
	b := startCourier(t, args...)
	b.WaitReady(t.Context())
	before := settled(t, ns, "app")

	updateSecret(t, ns, "cfg", func(x *corev1.Secret) { x.Data["k"] = []byte("2") })
	first := time.Now()
	a.Signal(syscall.SIGTERM)
	if code := a.Wait(10 * time.Second); code != 0 {
		t.Fatalf("the leader exited with %d on SIGTERM, want 0", code)
	}
	eventually(t, 5*time.Second, "the standby leads", b.isLeader)
	time.Sleep(time.Second) // the new term's first syncs are done
	updateSecret(t, ns, "cfg", func(x *corev1.Secret) { x.Data["k"] = []byte("3") })
	if took := time.Since(first); took > debounce-time.Second {
		t.Fatalf("the SIGTERM handover and the second change took %s, not within the %s debounce of the first change", took, debounce)
	}
	time.Sleep(time.Until(first.Add(debounce + quiet)))
	if n, err := replicaSets(t.Context(), ns, "app"); err != nil || n != before+1 {
		t.Fatalf("%d ReplicaSets (%v) once the window is over, want %d: the two changes of one window gave more than one rollout\n%s",
			n, err, before+1, linesWith(b.Logs(), "reloaded"))
	}
	rolledOutOnce(t, ns, "app", before, "secret/cfg")
}

func TestDeletedInputGivesInputMissingAndRollsOutOnlyWhenItComesBackChanged(t *testing.T) {
	s := setupReplication(t)
	ns := s.target(t, "apps", nil)
	createSecret(t, ns, "db", withData("k", "1"))
	createDeployment(t, ns, "app", map[string]string{keyReload: "true"}, podSpec([]corev1.EnvVar{keyRef("secret", "db", "k")}, nil, nil))
	g0 := settled(t, ns, "app")
	d0, err := admin().AppsV1().Deployments(ns).Get(t.Context(), "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deleteSecret(t, ns, "db")
	eventually(t, 10*time.Second, "InputMissing event", eventWith(ns, "app", "InputMissing", "secret/db"))
	noRollout(t, ns, "app", g0)
	// The deployment controller keeps writing the status and its own
	// revision annotation, so compare what courier writes: the spec (its
	// generation) and courier's annotations.
	if d, err := admin().AppsV1().Deployments(ns).Get(t.Context(), "app", metav1.GetOptions{}); err != nil ||
		d.Generation != d0.Generation || !maps.Equal(courierAnnotations(d.Annotations), courierAnnotations(d0.Annotations)) {
		t.Errorf("the deletion wrote to the workload (generation %d → %d, annotations %v → %v, %v)",
			d0.Generation, d.Generation, d0.Annotations, d.Annotations, err)
	}
	// Created again with the content the pods have: nothing to roll out.
	createSecret(t, ns, "db", withData("k", "1"))
	noRollout(t, ns, "app", g0)
	// Deleted and created again with other content: the pods run the old
	// content, so one rollout (#13 item 15).
	missing := eventCount(t, ns, "app", "InputMissing", "secret/db")
	deleteSecret(t, ns, "db")
	eventually(t, 10*time.Second, "InputMissing event again", func(ctx context.Context) (bool, error) {
		return eventCount(t, ns, "app", "InputMissing", "secret/db") > missing, nil
	})
	createSecret(t, ns, "db", withData("k", "2"))
	rolledOutOnce(t, ns, "app", g0, "secret/db")
}

func TestRestartsNeverRollOutAndAChangeWhileDownRollsOutOnce(t *testing.T) {
	s := setupReplication(t)
	ns := s.target(t, "apps", nil)
	createSecret(t, ns, "db", withData("k", "1"))
	createDeployment(t, ns, "app", map[string]string{keyReload: "true"}, podSpec([]corev1.EnvVar{keyRef("secret", "db", "k")}, nil, nil))
	g0 := settled(t, ns, "app")

	s.courier.Stop()
	c := startCourier(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src)
	c.WaitReady(t.Context())
	noRollout(t, ns, "app", g0)

	c.Stop()
	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["k"] = []byte("while-down") })
	c = startCourier(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src)
	c.WaitReady(t.Context())
	rolledOutOnce(t, ns, "app", g0, "secret/db")
}

// createEveryWorkloadKind creates a Deployment, StatefulSet, DaemonSet and
// CronJob named after their kind in ns, each with annotations and spec.
func createEveryWorkloadKind(t *testing.T, ns string, annotations map[string]string, spec corev1.PodSpec) {
	t.Helper()
	createDeployment(t, ns, "deployment", annotations, spec)
	labels := map[string]string{"app": "x"}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Annotations: annotations} }
	ctx := t.Context()
	if _, err := admin().AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: meta("statefulset"),
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin().AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{ObjectMeta: meta("daemonset"),
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cronTmpl := *tmpl.DeepCopy()
	cronTmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := admin().BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{ObjectMeta: meta("cronjob"),
		Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: cronTmpl}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// workloadStamp is what courier wrote on one workload: the pod template's
// config hash and the workload's baseline.
type workloadStamp struct{ hash, inputs string }

// workloadStamps reads the stamps of the workloads createEveryWorkloadKind made.
func workloadStamps(ctx context.Context, ns string) (map[string]workloadStamp, error) {
	apps, batch := admin().AppsV1(), admin().BatchV1()
	d, err := apps.Deployments(ns).Get(ctx, "deployment", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	sts, err := apps.StatefulSets(ns).Get(ctx, "statefulset", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	ds, err := apps.DaemonSets(ns).Get(ctx, "daemonset", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	cj, err := batch.CronJobs(ns).Get(ctx, "cronjob", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return map[string]workloadStamp{
		"Deployment":  {d.Spec.Template.Annotations[keyConfigHash], d.Annotations[keyInputs]},
		"StatefulSet": {sts.Spec.Template.Annotations[keyConfigHash], sts.Annotations[keyInputs]},
		"DaemonSet":   {ds.Spec.Template.Annotations[keyConfigHash], ds.Annotations[keyInputs]},
		"CronJob":     {cj.Spec.JobTemplate.Spec.Template.Annotations[keyConfigHash], cj.Annotations[keyInputs]},
	}, nil
}

// everyStamp reports whether ok holds for the stamp of every workload kind.
func everyStamp(ns string, ok func(workloadStamp) bool) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		stamps, err := workloadStamps(ctx, ns)
		if err != nil {
			return false, err
		}
		for _, s := range stamps {
			if !ok(s) {
				return false, nil
			}
		}
		return true, nil
	}
}

func TestReloadAllAndOtherWorkloadKinds(t *testing.T) {
	s := setupReplication(t, "--reload-all")
	ns := s.target(t, "apps", nil)
	createSecret(t, ns, "cfg", withData("k", "1"))
	createEveryWorkloadKind(t, ns, nil, podSpec([]corev1.EnvVar{keyRef("secret", "cfg", "k")}, nil, nil))
	eventually(t, converge, "baselines recorded, no template hash yet (first sight)", everyStamp(ns, func(s workloadStamp) bool {
		return s.hash == "" && strings.Contains(s.inputs, "secret/cfg=")
	}))
	updateSecret(t, ns, "cfg", func(x *corev1.Secret) { x.Data["k"] = []byte("2") })
	eventually(t, 10*time.Second, "every kind's pod template carries the config hash", everyStamp(ns, func(s workloadStamp) bool {
		return len(s.hash) == 64
	}))
	jobs, err := admin().BatchV1().Jobs(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil || len(jobs.Items) != 0 {
		t.Errorf("reloading the CronJob started %d Jobs (%v), want none", len(jobs.Items), err)
	}
}

func TestOneSourceChangeThroughFiftyReplicasGivesOneRolloutPerConsumer(t *testing.T) {
	s := setupReplication(t)
	const n = 50
	targets := make([]string, n)
	for i := range n {
		targets[i] = s.target(t, "fan", nil)
	}
	createSecret(t, s.src, "shared", withAnnotation(keyReplicateTo, "test="+s.id), withAnnotation(keyReload, "true"), withData("k", "v1"))
	for _, ns := range targets {
		eventually(t, converge, "replica in "+ns, secretIn(ns, "shared", map[string][]byte{"k": []byte("v1")}))
		createDeployment(t, ns, "app", nil, podSpec(nil, []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}}, nil))
	}
	for _, ns := range targets {
		settled(t, ns, "app")
	}
	before := s.courier.Metrics(t.Context())
	updateSecret(t, s.src, "shared", func(x *corev1.Secret) { x.Data["k"] = []byte("v2") })
	eventually(t, 30*time.Second, "every consumer rolled out", func(ctx context.Context) (bool, error) {
		for _, ns := range targets {
			if n, err := replicaSets(ctx, ns, "app"); err != nil || n < 2 {
				return false, err
			}
		}
		return true, nil
	})
	time.Sleep(quiet) // any second rollout would show within the debounce window
	for _, ns := range targets {
		if got, err := replicaSets(t.Context(), ns, "app"); err != nil || got != 2 {
			t.Errorf("%s: %d ReplicaSets (%v), want 2: exactly one rollout", ns, got, err)
		}
	}
	if metricSum(before, `courier_reloader_reloads_total{kind="Deployment",result="success"}`) != 0 {
		t.Fatalf("reloads counted before the change:\n%s", linesWith(before, "courier_reloader_reloads_total"))
	}
	s.courier.WaitMetricsExactly(t.Context(), map[string]float64{`courier_reloader_reloads_total{kind="Deployment",result="success"}`: float64(n)})
}

// courierAnnotations is the courier.dev/ part of an object's annotations.
func courierAnnotations(annotations map[string]string) map[string]string {
	own := maps.Clone(annotations)
	maps.DeleteFunc(own, func(k, _ string) bool { return !strings.HasPrefix(k, "courier.dev/") })
	return own
}

// TestReplicasAreAllWrittenBeforeAnyRollout: with no debounce and replica
// writes made one at a time (one replicator worker, slowed by the client
// limit), a source change still reaches every namespace before any consumer
// rolls: the first rollout's patch comes after the last replica's update in
// the API server's order (resourceVersions, etcd revisions on this cluster).
func TestReplicasAreAllWrittenBeforeAnyRollout(t *testing.T) {
	s := setupReplication(t, "--reload-debounce=0", "--replicator-workers=1", "--kube-api-qps=25", "--kube-api-burst=1")
	const n = 20
	targets := map[string]bool{}
	for range n {
		targets[s.target(t, "first", nil)] = true
	}
	createSecret(t, s.src, "shared", withAnnotation(keyReplicateTo, "test="+s.id), withAnnotation(keyReload, "true"), withData("k", "v1"))
	for ns := range targets {
		eventually(t, converge, "replica in "+ns, secretIn(ns, "shared", map[string][]byte{"k": []byte("v1")}))
		createDeployment(t, ns, "app", nil, podSpec(nil, []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}}, nil))
	}
	for ns := range targets {
		settled(t, ns, "app")
	}
	// The resourceVersion of each consumer's rollout: its first event with
	// a new config hash.
	ctx := t.Context()
	hashes := map[string]string{}
	for ns := range targets {
		d, err := admin().AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hashes[ns] = d.Spec.Template.Annotations[keyConfigHash]
	}
	w, err := admin().AppsV1().Deployments("").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=app"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	updateSecret(t, s.src, "shared", func(x *corev1.Secret) { x.Data["k"] = []byte("v2") })
	rollouts := map[string]uint64{}
	timeout := time.After(converge)
	for len(rollouts) < n {
		select {
		case ev := <-w.ResultChan():
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || !targets[d.Namespace] || rollouts[d.Namespace] != 0 || d.Spec.Template.Annotations[keyConfigHash] == hashes[d.Namespace] {
				continue
			}
			rollouts[d.Namespace] = revision(t, d.ResourceVersion)
		case <-timeout:
			t.Fatalf("%d of %d consumers rolled out within %s", len(rollouts), n, converge)
		}
	}
	var lastReplica uint64
	for ns := range targets {
		r, err := admin().CoreV1().Secrets(ns).Get(ctx, "shared", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Data["k"]) != "v2" {
			t.Fatalf("%s: the replica is not updated, yet its consumer rolled out", ns)
		}
		lastReplica = max(lastReplica, revision(t, r.ResourceVersion))
	}
	for ns, rv := range rollouts {
		if rv < lastReplica {
			t.Errorf("%s rolled out at revision %d, before the last replica's update (%d)", ns, rv, lastReplica)
		}
	}
}

func revision(t *testing.T, resourceVersion string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", resourceVersion, err)
	}
	return v
}

// courier holds a tenant's Secrets and ConfigMaps as their metadata only
// (the API server never sends it their values): an input a workload
// reloads for is read by name once per version, when the workload is first
// synced (an input created before its consumer, the order GitOps tools
// apply them in) and at each of its changes, and digested; what changes a
// key the workload does not consume, or labels only, is told apart on those
// digests and rolls nothing out. A restarted courier reads only the inputs
// that moved since the workload's baseline was written
// (courier.dev/config-versions; courier_reloader_input_reads_total).
func TestAConsumedInputIsReadOncePerVersion(t *testing.T) {
	ns := newNamespace(t, "gitops", nil)
	args := []string{"--namespace=" + ns, "--watch-namespaces=" + ns}
	c := startCourier(t, args...)
	c.WaitReady(t.Context())
	c.WaitLeader(t.Context())
	const reads = "courier_reloader_input_reads_total"
	createSecret(t, ns, "db", withData("password", "1"))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"a": "1", "b": "1"}}
	if _, err := admin().CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createDeployment(t, ns, "web", map[string]string{keyReload: "true"}, podSpec([]corev1.EnvVar{keyRef("configmap", "settings", "a")},
		[]corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}}, nil))
	rs := settled(t, ns, "web")
	c.WaitMetricsExactly(t.Context(), map[string]float64{reads: 2})

	updateSecret(t, ns, "db", func(s *corev1.Secret) { s.Data["password"] = []byte("2") })
	rolledOutOnce(t, ns, "web", rs, "secret/db")
	rs++
	c.WaitMetricsExactly(t.Context(), map[string]float64{reads: 3})
	// A change of a key the workload does not consume, and of labels only:
	// one read each, told apart on the digests.
	updateConfigMap(t, ns, "settings", func(m *corev1.ConfigMap) { m.Data["b"] = "2" })
	updateSecret(t, ns, "db", func(s *corev1.Secret) { s.Labels = map[string]string{"team": "a"} })
	noRollout(t, ns, "web", rs)
	c.WaitMetricsExactly(t.Context(), map[string]float64{reads: 5})

	// Both moved since the baseline was written (no write recorded their
	// new versions): a restart reads both.
	restart := func() *courierProcess {
		t.Helper()
		c.Stop()
		c = startCourier(t, args...)
		c.WaitReady(t.Context())
		c.WaitLeader(t.Context())
		return c
	}
	restart().WaitMetricsExactly(t.Context(), map[string]float64{reads: 2})
	updateConfigMap(t, ns, "settings", func(m *corev1.ConfigMap) { m.Data["a"] = "2" })
	rolledOutOnce(t, ns, "web", rs, "configmap/settings")
	rs++
	c.WaitMetricsExactly(t.Context(), map[string]float64{reads: 3})
	// The rollout recorded both at their versions (courier.dev/config-versions):
	// the next restart reads neither, and a labels-only write of one costs
	// that one read.
	eventually(t, converge, "both inputs' versions recorded", func(ctx context.Context) (bool, error) {
		d, err := admin().AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		v := d.Annotations["courier.dev/config-versions"]
		return strings.Contains(v, "configmap/settings=") && strings.Contains(v, "secret/db="), nil
	})
	restart()
	eventually(t, converge, "the new leader's first sync of every workload done", func(ctx context.Context) (bool, error) {
		adds, _ := c.MetricValue(ctx, `courier_workqueue_adds_total{name="reloader"}`)
		depth, _ := c.MetricValue(ctx, `courier_workqueue_depth{name="reloader"}`)
		busy, _ := c.MetricValue(ctx, `courier_workqueue_longest_running_processor_seconds{name="reloader"}`)
		return adds > 0 && depth == 0 && busy == 0, nil
	})
	c.WaitMetricsExactly(t.Context(), map[string]float64{reads: 0})
	updateSecret(t, ns, "db", func(s *corev1.Secret) { s.Labels["team"] = "b" })
	c.WaitMetricsExactly(t.Context(), map[string]float64{reads: 1})
	updateConfigMap(t, ns, "settings", func(m *corev1.ConfigMap) { m.Data["a"] = "3" })
	rolledOutOnce(t, ns, "web", rs, "configmap/settings")
	c.WaitMetricsExactly(t.Context(), map[string]float64{reads: 2})
}
