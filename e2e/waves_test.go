package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/google/go-cmp/cmp"

	"github.com/courier-k8s/courier/internal/status"
)

// Rollout waves (SPEC, Reload: rollout waves and health gates;
// docs/reload.md): a source's change reaches the consumers of its replicas
// wave by wave, each wave only once the earlier ones are healthy on it.

const (
	keyReloadWave = "courier.dev/reload-wave"
	keyReloadedAt = "courier.dev/reloaded-at"
)

// waveSetup is a source Secret "ca" (key crt) opted in to reload and
// replicated into namespaces, and courier.
type waveSetup struct {
	replicationSetup
}

func setupWaves(t *testing.T, args ...string) waveSetup {
	t.Helper()
	s := waveSetup{setupReplication(t, append([]string{"--reload-debounce=200ms"}, args...)...)}
	createSecret(t, s.src, "ca", withAnnotation(keyReplicateTo, "test="+s.id), withAnnotation(keyReload, "true"), withData("crt", "v1"))
	return s
}

// namespace is a namespace the source reaches, once its replica is there.
func (s waveSetup) namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := s.target(t, prefix, nil)
	eventually(t, converge, "replica of ca in "+ns, func(ctx context.Context) (bool, error) {
		r, err := getSecret(ctx, ns, "ca")
		return err == nil && r != nil, nil
	})
	return ns
}

// change sets the source's value.
func (s waveSetup) change(t *testing.T, value string) {
	t.Helper()
	updateSecret(t, s.src, "ca", func(x *corev1.Secret) { x.Data["crt"] = []byte(value) })
}

// waveDeployment creates a Deployment consuming ca's crt in wave wave
// ("": no annotation), changed by edit, and waits until it is healthy and
// courier has its baseline.
func waveDeployment(t *testing.T, ns, name, wave string, edit func(*appsv1.Deployment)) {
	t.Helper()
	labels := map[string]string{"app": name}
	annotations := map[string]string{keyReload: "true"}
	if wave != "" {
		annotations[keyReloadWave] = wave
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: podSpec([]corev1.EnvVar{keyRef("secret", "ca", "crt")}, nil, nil)},
		},
	}
	if edit != nil {
		edit(d)
	}
	if _, err := admin().AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment %s/%s: %v", ns, name, err)
	}
	settled(t, ns, name)
	if _, err := admin().CoreV1().Secrets(ns).Get(t.Context(), "ca", metav1.GetOptions{}); err == nil {
		// Its baseline records ca as it is now: courier's cache of Secrets
		// may see ca after its cache of Deployments saw the workload (two
		// watches, no order), and then a change of ca within the debounce
		// of its appearance is taken for its first content (no rollout,
		// nothing told; docs/reload.md).
		eventually(t, converge, ns+"/"+name+"'s baseline records secret/ca", func(ctx context.Context) (bool, error) {
			d, err := admin().AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && strings.Contains(d.Annotations[keyInputs], "secret/ca="), err
		})
	}
	eventually(t, 30*time.Second, ns+"/"+name+" healthy", func(ctx context.Context) (bool, error) {
		st, err := deploymentNow(ctx, ns, name)
		return st.healthy, err
	})
}

// deploymentState is what a test reads of a Deployment: the config hash
// courier last wrote into its pod template, and whether it is healthy on
// its latest template as `kubectl rollout status` judges it (the test's own
// reading, not courier's).
type deploymentState struct {
	hash    string
	healthy bool
}

// deploymentNow reads Deployment ns/name; a name "statefulset/x" or
// "daemonset/x" reads that workload instead.
func deploymentNow(ctx context.Context, ns, name string) (deploymentState, error) {
	if kind, n, ok := strings.Cut(name, "/"); ok {
		return otherNow(ctx, kind, ns, n)
	}
	d, err := admin().AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return deploymentState{}, err
	}
	s := d.Status
	return deploymentState{
		hash: d.Spec.Template.Annotations[keyConfigHash],
		healthy: s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == *d.Spec.Replicas &&
			s.Replicas == s.UpdatedReplicas && s.AvailableReplicas == s.UpdatedReplicas,
	}, nil
}

// otherNow is deploymentNow of a StatefulSet (healthy: every replica on
// updateRevision and ready) or a DaemonSet (every scheduled pod updated and
// available).
func otherNow(ctx context.Context, kind, ns, name string) (deploymentState, error) {
	switch kind {
	case "statefulset":
		s, err := admin().AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return deploymentState{}, err
		}
		st := s.Status
		return deploymentState{hash: s.Spec.Template.Annotations[keyConfigHash],
			healthy: st.ObservedGeneration >= s.Generation && st.UpdatedReplicas == *s.Spec.Replicas && st.ReadyReplicas == *s.Spec.Replicas &&
				st.CurrentRevision == st.UpdateRevision}, nil
	case "daemonset":
		d, err := admin().AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return deploymentState{}, err
		}
		st := d.Status
		return deploymentState{hash: d.Spec.Template.Annotations[keyConfigHash],
			healthy: st.ObservedGeneration >= d.Generation && st.DesiredNumberScheduled > 0 &&
				st.UpdatedNumberScheduled == st.DesiredNumberScheduled && st.NumberAvailable == st.DesiredNumberScheduled}, nil
	}
	return deploymentState{}, fmt.Errorf("no such kind in this test: %s", kind)
}

// waves are Deployments in wave order, with their config hashes before a
// change.
type waves struct {
	deployments [][2]string // namespace, name
	before      []string
	// levels are their waves (nil: each its own, in order).
	levels []int
}

func (w waves) level(i int) int {
	if w.levels == nil {
		return i
	}
	return w.levels[i]
}

func wavesOf(t *testing.T, deployments ...[2]string) waves {
	t.Helper()
	w := waves{deployments: deployments}
	for _, d := range deployments {
		st, err := deploymentNow(t.Context(), d[0], d[1])
		if err != nil {
			t.Fatal(err)
		}
		w.before = append(w.before, st.hash)
	}
	return w
}

// inOrder watches the Deployments of waves (the later waves first)
// until the last has rolled out, and fails if any rolled out while one of
// an earlier wave had not rolled out or was not healthy: each round reads
// the later waves before the earlier ones, so an earlier wave read healthy
// after a later one was read rolled out was healthy before that rollout
// too (it stays healthy in these tests). It returns when each rolled out.
func (w waves) inOrder(t *testing.T, timeout time.Duration) []time.Time {
	t.Helper()
	waves, before := w.deployments, w.before
	rolled := make([]time.Time, len(waves))
	deadline := time.Now().Add(timeout)
	for rolled[len(waves)-1].IsZero() {
		if time.Now().After(deadline) {
			t.Fatalf("not every wave rolled out within %s: rolled out at %v", timeout, rolled)
		}
		now := make([]deploymentState, len(waves))
		for i := len(waves) - 1; i >= 0; i-- {
			st, err := deploymentNow(t.Context(), waves[i][0], waves[i][1])
			if err != nil {
				t.Fatal(err)
			}
			now[i] = st
		}
		for i, st := range now {
			if st.hash == before[i] {
				continue
			}
			if rolled[i].IsZero() {
				rolled[i] = time.Now()
			}
			for j := range now {
				if w.level(j) >= w.level(i) {
					continue
				}
				if now[j].hash == before[j] || !now[j].healthy {
					t.Fatalf("%s/%s rolled out while %s/%s, of an earlier wave, was not yet healthy on the change (rolled out: %v)",
						waves[i][0], waves[i][1], waves[j][0], waves[j][1], now[j].hash != before[j])
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return rolled
}

// TestRolloutWavesGoInOrderEachHealthyBeforeTheNext: one change of a
// source reaches the consumers of its replicas in three namespaces wave by
// wave; a wave's workload that takes 4 s to become available holds the next
// wave those 4 s; each rolls out once, and the waiting ones are told.
func TestRolloutWavesGoInOrderEachHealthyBeforeTheNext(t *testing.T) {
	s := setupWaves(t)
	a, b, c := s.namespace(t, "wave-a"), s.namespace(t, "wave-b"), s.namespace(t, "wave-c")
	slow := func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 4 }
	waveDeployment(t, a, "web", "", slow) // no annotation: wave 0
	waveDeployment(t, b, "api", "1", slow)
	waveDeployment(t, c, "edge", "2", nil)
	// A consumer in wave 0 that is not courier's to roll out (opted out)
	// and never healthy holds no wave back.
	optOut := podSpec([]corev1.EnvVar{keyRef("secret", "ca", "crt")}, nil, nil)
	optOut.NodeSelector = map[string]string{"courier-e2e/nowhere": "true"}
	createDeployment(t, a, "opted-out", map[string]string{keyReload: "false"}, optOut)

	w := wavesOf(t, [2]string{a, "web"}, [2]string{b, "api"}, [2]string{c, "edge"})
	s.change(t, "v2")
	at := w.inOrder(t, 60*time.Second)
	for i, gap := range []time.Duration{at[1].Sub(at[0]), at[2].Sub(at[1])} {
		if gap < 3*time.Second {
			t.Errorf("wave %d rolled out %s after wave %d, whose workload takes 4 s to become available", i+1, gap, i)
		}
	}
	for _, w := range [][2]string{{a, "web"}, {b, "api"}, {c, "edge"}} {
		rolledOutOnce(t, w[0], w[1], 1, "secret/ca")
	}
	for _, w := range [][2]string{{b, "api"}, {c, "edge"}} {
		if ok, err := eventWith(w[0], w[1], "ReloadWaiting", "secret/ca changed: this workload (wave")(t.Context()); !ok || err != nil {
			t.Errorf("no ReloadWaiting Event on %s/%s (%v)", w[0], w[1], err)
		}
	}
}

// nowhere makes a Deployment's pods unschedulable on every node, as a bad
// change would make them crash: its rollout never completes.
func nowhere(t *testing.T, ns, name string, on bool) {
	t.Helper()
	updateOnConflict(t, "node selector of "+ns+"/"+name, func(ctx context.Context) error {
		d, err := admin().AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Template.Spec.NodeSelector = nil
		if on {
			d.Spec.Template.Spec.NodeSelector = map[string]string{"courier-e2e/nowhere": "true"}
		}
		_, err = admin().AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
}

// TestAFailedWaveHaltsTheChangeUntilFixedOrReplaced: a wave-0 workload
// whose rollout fails (its progress deadline exceeded) halts the change:
// the wave-1 workload is not rolled out, a ReloadHalted Warning on it, on
// its input and on the source names the failed workload, the metric counts
// the change. A restart of courier keeps it halted and rolls nothing out
// again. A newer change replaces it (rolled out from wave 0 again, halted
// again), and once the failed workload is fixed the held one rolls out by
// itself, once, with the newest content.
func TestAFailedWaveHaltsTheChangeUntilFixedOrReplaced(t *testing.T) {
	s := setupWaves(t)
	a, b := s.namespace(t, "halt-a"), s.namespace(t, "halt-b")
	waveDeployment(t, a, "web", "0", func(d *appsv1.Deployment) { d.Spec.ProgressDeadlineSeconds = ptr.To[int32](2) })
	waveDeployment(t, b, "api", "1", nil)
	waveDeployment(t, b, "free", "", nil) // wave 0, healthy: rolls out for every change at once

	nowhere(t, a, "web", true) // web's own rollout: its pods can never be scheduled
	s.change(t, "v2")
	rolledOutOnce(t, b, "free", 1, "secret/ca")
	eventually(t, 30*time.Second, "ReloadHalted on "+b+"/api", eventWith(b, "api", "ReloadHalted", "is not healthy: its rollout failed", "Deployment "+a+"/web, of wave 0"))
	eventually(t, converge, "ReloadHalted on api's input", eventWith(b, "ca", "ReloadHalted", "halted at wave 0: Deployment "+a+"/web"))
	eventually(t, converge, "ReloadHalted on the source", eventWith(s.src, "ca", "ReloadHalted", "(in namespace "+b+")"))
	if v, _ := s.courier.MetricValue(t.Context(), "courier_reload_halted_changes"); v != 1 {
		t.Errorf("courier_reload_halted_changes = %v, want 1", v)
	}
	// courier status reads the objects: while web's controller reports
	// progress again (its rollout's old ReplicaSet scaled down) it says
	// "waiting", until web's deadline passes again.
	want := status.Change{Source: "Secret " + s.src + "/ca", Wave: 1, State: "halted", Workloads: []string{"Deployment " + b + "/api"}}
	eventually(t, 30*time.Second, "courier status shows the change halted", func(context.Context) (bool, error) {
		shown := statusReport(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src).Changes
		return slices.ContainsFunc(shown, func(c status.Change) bool { return cmp.Equal(c, want) }), nil
	})
	webRolled, err := replicaSets(t.Context(), a, "web")
	if err != nil {
		t.Fatal(err)
	}
	if webRolled != 3 { // its first, its own broken one, courier's
		t.Errorf("web has %d ReplicaSets, want 3", webRolled)
	}
	noRollout(t, b, "api", 1)

	// web moves while it stays failed (scaled up: for a moment its status
	// is behind its spec, and it is not "failed" but "progressing"): the
	// change stays halted until web is healthy, told once, counted once.
	told := eventCount(t, b, "api", "ReloadHalted")
	updateOnConflict(t, "scale "+a+"/web", func(ctx context.Context) error {
		d, err := admin().AppsV1().Deployments(a).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Replicas = ptr.To[int32](2)
		_, err = admin().AppsV1().Deployments(a).Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	eventually(t, converge, "web's controller saw the new scale", func(ctx context.Context) (bool, error) {
		d, err := admin().AppsV1().Deployments(a).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration == d.Generation, err
	})
	consistently(t, quiet, "the change stays halted, told once", func(ctx context.Context) (bool, error) {
		v, ok := s.courier.MetricValue(ctx, "courier_reload_halted_changes")
		return (!ok || v == 1) && eventCount(t, b, "api", "ReloadHalted") == told, nil // !ok: a scrape that failed says nothing
	})

	// A restart: the halt is read again from the objects; nothing rolls out twice.
	s.courier.Stop()
	s.courier = startCourier(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src, "--reload-debounce=200ms")
	s.courier.WaitLeader(t.Context())
	eventually(t, converge, "the halt counted again after the restart", func(ctx context.Context) (bool, error) {
		v, _ := s.courier.MetricValue(ctx, "courier_reload_halted_changes")
		return v == 1, nil
	})
	noRollout(t, b, "api", 1)
	noRollout(t, a, "web", webRolled)

	// A newer change replaces the halted one: from wave 0 again, halted
	// again, and told again on the input.
	toldBefore := eventCount(t, b, "ca", "ReloadHalted")
	s.change(t, "v3")
	rolledOutOnce(t, a, "web", webRolled, "secret/ca")
	rolledOutOnce(t, b, "free", 2, "secret/ca")
	eventually(t, 30*time.Second, "the newer change halted again, told on api's input", func(ctx context.Context) (bool, error) {
		return eventCount(t, b, "ca", "ReloadHalted") > toldBefore, nil
	})
	noRollout(t, b, "api", 1)

	// web fixed: the held wave goes on by itself, once, with v3.
	nowhere(t, a, "web", false)
	rolledOutOnce(t, b, "api", 1, "secret/ca")
	api, err := deploymentNow(t.Context(), b, "api")
	if err != nil {
		t.Fatal(err)
	}
	free, err := deploymentNow(t.Context(), b, "free")
	if err != nil {
		t.Fatal(err)
	}
	if api.hash != free.hash {
		t.Errorf("api rolled out with config hash %s, want v3's (free's) %s", api.hash, free.hash)
	}
	eventually(t, converge, "courier_reload_halted_changes back to 0", func(ctx context.Context) (bool, error) {
		v, ok := s.courier.MetricValue(ctx, "courier_reload_halted_changes")
		return ok && v == 0, nil
	})
}

// TestAWaveNotHealthyWithinTheTimeoutHalts: without a progress deadline to
// report it, a wave-0 workload still not healthy --reload-wave-timeout after
// courier rolled it out halts the change as well.
func TestAWaveNotHealthyWithinTheTimeoutHalts(t *testing.T) {
	s := setupWaves(t, "--reload-wave-timeout=5s")
	ns := s.namespace(t, "timeout")
	waveDeployment(t, ns, "web", "0", nil) // the default progress deadline: 10 minutes
	waveDeployment(t, ns, "api", "1", nil)
	nowhere(t, ns, "web", true)
	s.change(t, "v2")
	rolledOutOnce(t, ns, "web", 2, "secret/ca")
	took := eventually(t, 20*time.Second, "ReloadHalted on api", eventWith(ns, "api", "ReloadHalted", "not healthy 5s after courier rolled it out (--reload-wave-timeout)"))
	t.Logf("halted %s after web's rollout was seen", took)
	noRollout(t, ns, "api", 1)
}

// TestAWaveInProgressSurvivesALeaderChange: the leader rolls out wave 0 and
// stops while wave 1 waits; the standby that takes over waits for the same
// workload, rolls wave 1 out once it is healthy, and rolls nothing out twice.
func TestAWaveInProgressSurvivesALeaderChange(t *testing.T) {
	s := setupWaves(t)
	standby := startCourier(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src, "--reload-debounce=200ms")
	standby.WaitReady(t.Context())
	a, b := s.namespace(t, "lead-a"), s.namespace(t, "lead-b")
	waveDeployment(t, a, "web", "", func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 10 })
	waveDeployment(t, b, "api", "1", nil)

	w := wavesOf(t, [2]string{a, "web"}, [2]string{b, "api"})
	s.change(t, "v2")
	eventually(t, 10*time.Second, "web rolled out", func(ctx context.Context) (bool, error) {
		n, err := replicaSets(ctx, a, "web")
		return n == 2, err
	})
	s.courier.Stop()
	standby.WaitLeader(t.Context())
	w.inOrder(t, 40*time.Second)
	noRollout(t, a, "web", 2)
	noRollout(t, b, "api", 2)
	if d, err := admin().AppsV1().Deployments(b).Get(t.Context(), "api", metav1.GetOptions{}); err != nil || d.Annotations[keyReloadedFor] != "secret/ca" {
		t.Errorf("api: %v, %s = %q, want secret/ca", err, keyReloadedFor, d.Annotations[keyReloadedFor])
	}
}

// TestTheBudgetKeepsAtMostNRolloutsInFlight: with --reload-max-in-flight=2,
// one change of an input six workloads consume never has more than two of
// courier's rollouts not yet healthy at once — counted from the API server,
// each count one consistent list — yet uses both slots; the rollouts that
// waited go in namespace/name order; each workload rolls out once. courier
// runs namespace-scoped, with Roles only: the budget counts what it sees
// (not the other tests' rollouts in this cluster).
func TestTheBudgetKeepsAtMostNRolloutsInFlight(t *testing.T) {
	tid := testID()
	src := newNamespace(t, "budget-src", map[string]string{"test": tid})
	ns := newNamespace(t, "budget", map[string]string{"test": tid})
	own := newNamespace(t, "courier-budget", nil)
	id := scopedIdentity(t, "courier-budget-"+tid, scopedRules(t), src, ns, own)
	c := startCourierAs(t, id, nil, "--namespace="+own, "--watch-namespaces="+src+","+ns, "--source-namespaces="+src,
		"--reload-debounce=200ms", "--reload-max-in-flight=2")
	c.WaitLeader(t.Context())
	createSecret(t, src, "ca", withAnnotation(keyReplicateTo, "test="+tid), withAnnotation(keyReload, "true"), withData("crt", "v1"))
	eventually(t, converge, "replica of ca in "+ns, secretIn(ns, "ca", map[string][]byte{"crt": []byte("v1")}))
	names := []string{"f", "e", "d", "c", "b", "a"}
	for _, name := range names {
		waveDeployment(t, ns, name, "", func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 2 })
	}
	updateSecret(t, src, "ca", func(x *corev1.Secret) { x.Data["crt"] = []byte("v2") })
	start := time.Now()
	most, rolled, last := 0, map[string]time.Duration{}, ""
	eventually(t, 60*time.Second, "every workload rolled out and healthy", func(ctx context.Context) (bool, error) {
		list, err := admin().AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var flying []string
		done := 0
		for _, d := range list.Items {
			if _, ok := d.Annotations[keyReloadedAt]; !ok {
				continue
			}
			if _, ok := rolled[d.Name]; !ok {
				rolled[d.Name] = time.Since(start)
			}
			st := d.Status
			if st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == *d.Spec.Replicas && st.Replicas == st.UpdatedReplicas && st.AvailableReplicas == st.UpdatedReplicas {
				done++
			} else {
				flying = append(flying, d.Name)
			}
		}
		if now := fmt.Sprint(flying); now != last { // what a failure is read from
			t.Logf("%s: in flight %v, %d done", time.Since(start).Round(time.Millisecond), flying, done)
			last = now
		}
		most = max(most, len(flying))
		return done == len(names), nil
	})
	if most != 2 {
		t.Errorf("up to %d of courier's rollouts were not healthy at once, want 2: never more, and the budget used", most)
	}
	// The rollouts that waited start in name order as slots free. Two let
	// go by one freeing (a and b turn healthy together) are written by two
	// workers at once, in either order: a slot frees only when a rollout of
	// minReadySeconds=2 turns healthy, so starts less than 1.5 s apart are
	// one release.
	order := slices.SortedFunc(maps.Keys(rolled), func(a, b string) int {
		if rolled[a] != rolled[b] {
			return int(rolled[a] - rolled[b])
		}
		return strings.Compare(a, b)
	})
	t.Logf("rollouts started at %v", rolled)
	for i, a := range order[2:] {
		for _, b := range order[2+i+1:] {
			if b < a && rolled[b]-rolled[a] >= 1500*time.Millisecond {
				t.Errorf("%s waited longer than %s (%s against %s), want namespace/name order", b, a, rolled[b], rolled[a])
			}
		}
	}
	for _, name := range names {
		noRollout(t, ns, name, 2)
	}
	eventually(t, converge, "courier_reload_in_flight back to 0", func(ctx context.Context) (bool, error) {
		v, ok := c.MetricValue(ctx, "courier_reload_in_flight")
		return ok && v == 0, nil
	})
}

// TestPlanListsWhatTheNextChangeDoesAndWritesNothing: `courier plan` on a
// source lists the consumers of its replicas that the next change rolls
// out, by wave, and those it does not, with their reasons (opted out,
// notify only, held by the minimum interval, behind a wave so held); it
// writes nothing (no write
// by it in the API server's audit log); and the change that follows rolls
// out exactly what it listed, in its waves.
func TestPlanListsWhatTheNextChangeDoesAndWritesNothing(t *testing.T) {
	s := setupWaves(t)
	a, b := s.namespace(t, "plan-a"), s.namespace(t, "plan-b")
	waveDeployment(t, a, "web", "", func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 2 })
	waveDeployment(t, b, "api", "1", nil)
	waveDeployment(t, b, "free", "", nil)
	waveDeployment(t, b, "told", "", func(d *appsv1.Deployment) { d.Annotations[keyReload] = "notify" })
	waveDeployment(t, a, "spaced", "2", func(d *appsv1.Deployment) { d.Annotations["courier.dev/reload-min-interval"] = "1h" })
	waveDeployment(t, b, "late", "3", nil) // behind spaced, which its interval holds
	spec := podSpec([]corev1.EnvVar{keyRef("secret", "ca", "crt")}, nil, nil)
	createDeployment(t, a, "opted-out", map[string]string{keyReload: "false"}, spec)
	unsettled(t, a, "opted-out")
	// A first change, so that spaced has rolled out within its interval.
	s.change(t, "v2")
	for _, w := range [][2]string{{a, "web"}, {b, "free"}, {b, "api"}, {a, "spaced"}, {b, "late"}} {
		eventually(t, 30*time.Second, "first rollout of "+w[0]+"/"+w[1], func(ctx context.Context) (bool, error) {
			n, err := replicaSets(ctx, w[0], w[1])
			return n == 2, err
		})
	}
	eventually(t, converge, "told notified", eventWith(b, "told", "ReloadNotified"))

	mark := auditMark(t)
	cmd := exec.CommandContext(t.Context(), env.courier, "plan", "secret/ca", "-n", s.src, "-o", "json",
		"--kubeconfig="+env.cluster.Kubeconfig, "--namespace="+s.courier.namespace)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("courier plan: %v\n%s", err, stderr.String())
	}
	var plan status.Plan
	if err := json.Unmarshal(out, &plan); err != nil {
		t.Fatalf("courier plan -o json: %v\n%s", err, out)
	}
	type line struct{ Wave, Workload, Verdict string }
	var got []line
	for _, w := range plan.Waves {
		for _, c := range w.Workloads {
			got = append(got, line{strconv.Itoa(w.Wave), c.Namespace + "/" + c.Name, c.Verdict.Verdict})
		}
	}
	for _, c := range plan.NotRolledOut {
		got = append(got, line{"-", c.Namespace + "/" + c.Name, c.Verdict.Verdict})
	}
	want := []line{
		{"0", a + "/web", "rolls out"}, {"0", b + "/free", "rolls out"},
		{"1", b + "/api", "waits for an earlier wave"},
		{"-", a + "/opted-out", "not opted in"}, {"-", a + "/spaced", "held"}, {"-", b + "/late", "held"}, {"-", b + "/told", "notifies"},
	}
	sortLines := func(ls []line) {
		slices.SortFunc(ls, func(x, y line) int {
			return strings.Compare(x.Wave+" "+x.Workload, y.Wave+" "+y.Workload)
		})
	}
	sortLines(got)
	sortLines(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("courier plan (-want +got):\n%s\n%s", diff, out)
	}
	for _, c := range plan.NotRolledOut {
		if c.Name == "late" && !strings.Contains(c.Verdict.Message, "Deployment "+a+"/spaced (wave 2, held back: minimum interval)") {
			t.Errorf("late's verdict does not say spaced holds it: %q", c.Verdict.Message)
		}
	}
	if diff := cmp.Diff([]string{a, b}, plan.Replicas); diff != "" {
		t.Errorf("replicas (-want +got):\n%s", diff)
	}
	// Nothing written: no write by courier's user agent as the admin (the
	// daemons run as ServiceAccounts). The control: a write sent with that
	// user agent is found.
	cfg := rest.CopyConfig(env.cluster.Config)
	cfg.UserAgent = "courier/plan-control"
	control := kubernetes.NewForConfigOrDie(cfg)
	if _, err := control.CoreV1().ConfigMaps(b).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plan-control"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var writes []string
	eventually(t, converge, "the control write in the audit log", func(context.Context) (bool, error) {
		writes = nil
		for _, e := range auditSince(t, mark) {
			if e.User.Username == "admin" && strings.HasPrefix(e.UserAgent, "courier/") && e.Verb != "get" && e.Verb != "list" && e.Verb != "watch" {
				writes = append(writes, e.Verb+" "+e.URI+" ("+e.UserAgent+")")
			}
		}
		return slices.ContainsFunc(writes, func(w string) bool { return strings.Contains(w, "courier/plan-control") }), nil
	})
	if len(writes) != 1 {
		t.Errorf("courier plan wrote: %v", writes)
	}

	// The change: exactly the plan's rollouts, in its waves.
	w := wavesOf(t, [2]string{a, "web"}, [2]string{b, "api"})
	s.change(t, "v3")
	w.inOrder(t, 30*time.Second)
	rolledOutOnce(t, b, "free", 2, "secret/ca")
	for _, d := range [][2]string{{a, "web"}, {b, "api"}} {
		noRollout(t, d[0], d[1], 3)
	}
	for _, d := range [][3]string{{a, "spaced", "2"}, {b, "late", "2"}, {b, "told", "1"}, {a, "opted-out", "1"}} {
		n, _ := strconv.Atoi(d[2])
		noRollout(t, d[0], d[1], n)
	}
}

// TestWavesWaitForStatefulSetsAndDaemonSets: wave 0 holds a StatefulSet of
// two replicas and a DaemonSet, each taking 3 s to become available after
// a pod is ready; the Deployment of wave 1 rolls out only once both have
// every replica updated and ready.
func TestWavesWaitForStatefulSetsAndDaemonSets(t *testing.T) {
	s := setupWaves(t)
	a, b := s.namespace(t, "kinds-a"), s.namespace(t, "kinds-b")
	labels := func(name string) map[string]string { return map[string]string{"app": name} }
	tmpl := func(name string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels(name)}, Spec: podSpec([]corev1.EnvVar{keyRef("secret", "ca", "crt")}, nil, nil)}
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: a, Annotations: map[string]string{keyReload: "true"}}
	}
	if _, err := admin().AppsV1().StatefulSets(a).Create(t.Context(), &appsv1.StatefulSet{ObjectMeta: meta("db"), Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](2), MinReadySeconds: 3, Selector: &metav1.LabelSelector{MatchLabels: labels("db")}, Template: tmpl("db")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin().AppsV1().DaemonSets(a).Create(t.Context(), &appsv1.DaemonSet{ObjectMeta: meta("agent"), Spec: appsv1.DaemonSetSpec{
		MinReadySeconds: 3, Selector: &metav1.LabelSelector{MatchLabels: labels("agent")}, Template: tmpl("agent")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"statefulset/db", "daemonset/agent"} {
		eventually(t, 60*time.Second, name+" healthy with courier's baseline", func(ctx context.Context) (bool, error) {
			st, err := deploymentNow(ctx, a, name)
			return st.healthy, err
		})
	}
	waveDeployment(t, b, "api", "1", nil)
	eventually(t, converge, "baselines of db and agent", func(ctx context.Context) (bool, error) {
		sts, err := admin().AppsV1().StatefulSets(a).Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ds, err := admin().AppsV1().DaemonSets(a).Get(ctx, "agent", metav1.GetOptions{})
		return err == nil && sts.Annotations[keyInputs] != "" && ds.Annotations[keyInputs] != "", err
	})

	w := wavesOf(t, [2]string{a, "statefulset/db"}, [2]string{a, "daemonset/agent"}, [2]string{b, "api"})
	w.levels = []int{0, 0, 1}
	s.change(t, "v2")
	at := w.inOrder(t, 60*time.Second)
	last := at[0]
	if at[1].After(last) {
		last = at[1]
	}
	if gap := at[2].Sub(last); gap < 2*time.Second {
		t.Errorf("wave 1 rolled out %s after the last of wave 0, which takes 3 s to become available", gap)
	}
	rolledOutOnce(t, b, "api", 1, "secret/ca")
}

// TestUnderCompatAWorkloadWithoutAWaveIsInNone: under --compat=reloader a
// workload without courier.dev/reload-wave neither waits nor holds a later
// wave back, as with Reloader — even one never healthy — while annotated
// ones keep their order.
func TestUnderCompatAWorkloadWithoutAWaveIsInNone(t *testing.T) {
	s := setupWaves(t, "--compat=reloader")
	ns := s.namespace(t, "compat-waves")
	waveDeployment(t, ns, "web", "0", func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 4 })
	waveDeployment(t, ns, "api", "1", nil)
	waveDeployment(t, ns, "legacy", "", nil)
	nowhere(t, ns, "legacy", true) // never healthy again
	w := wavesOf(t, [2]string{ns, "web"}, [2]string{ns, "api"})
	s.change(t, "v2")
	eventually(t, 10*time.Second, "legacy rolled out at once, though web is not healthy yet", func(ctx context.Context) (bool, error) {
		l, err := deploymentNow(ctx, ns, "legacy")
		if err != nil || l.hash == "" {
			return false, err
		}
		web, err := deploymentNow(ctx, ns, "web")
		if err == nil && web.healthy && web.hash != w.before[0] {
			return false, fmt.Errorf("web was healthy on the change before legacy rolled out")
		}
		return true, err
	})
	w.inOrder(t, 30*time.Second)
}

// TestArgoRolloutsOfAnEarlierWaveAreWaitedForUntilHealthy: with the real
// Argo Rollouts controller, a Deployment of wave 1 rolls out only once the
// Rollouts of wave 0 — one with its own template, one taking it from a
// Deployment (spec.workloadRef) — are Healthy at their new revision.
func TestArgoRolloutsOfAnEarlierWaveAreWaitedForUntilHealthy(t *testing.T) {
	startArgoRollouts(t)
	id := identityWith(t, "courier-argo-waves", argoOverlayRBAC(t))
	ns := newNamespace(t, "argo-waves", nil)
	c := startCourierAs(t, id, nil, "--source-namespaces="+ns, "--reload-resources=rollouts.argoproj.io", "--reload-debounce=200ms")
	c.WaitReady(t.Context())
	c.WaitLeader(t.Context())
	createSecret(t, ns, "ca", withAnnotation(keyReload, "true"), withData("crt", "v1"))
	spec := rolloutSpec("web", podTemplate("web", podSpec([]corev1.EnvVar{keyRef("secret", "ca", "crt")}, nil, nil)))
	spec["minReadySeconds"] = int64(1)
	createRollout(t, ns, "web", map[string]string{keyReload: "true"}, spec) // wave 0
	// Wave 0 too: a Rollout taking its template from a Deployment kept at
	// 0 replicas (courier's rollout changes the Deployment, not the Rollout).
	// Slower than web: api must wait for it, not for web alone.
	createRefRollout(t, ns, "ref", "base", podSpec([]corev1.EnvVar{keyRef("secret", "ca", "crt")}, nil, nil), 8)
	rolloutAt(t, ns, "web", "1", 1)
	rolloutAt(t, ns, "ref", "1", 1)
	customBaselined(t, rollouts, ns, "web")
	customBaselined(t, rollouts, ns, "ref")
	waveDeployment(t, ns, "api", "1", nil)

	updateSecret(t, ns, "ca", func(x *corev1.Secret) { x.Data["crt"] = []byte("v2") })
	eventually(t, time.Minute, "api rolled out", func(ctx context.Context) (bool, error) {
		api, err := deploymentNow(ctx, ns, "api")
		if err != nil || api.hash == "" {
			return false, err
		}
		for _, name := range []string{"web", "ref"} {
			r, _, err := rolloutStateOf(ctx, t, ns, name)
			if err != nil {
				return false, err
			}
			if r.revision != "2" || !r.completed {
				t.Fatalf("api rolled out while Rollout %s was at revision %s, completed %v", name, r.revision, r.completed)
			}
		}
		return true, nil
	})
	rolledOutOnce(t, ns, "api", 1, "secret/ca")
}

// TestAWaveWaitsForAWatchedNamespaceCourierCannotList: absence is evidence
// only inside courier's view. A namespace-scoped courier may not list in b,
// one of its --watch-namespaces (no Role there yet), where the source's
// replica, and workloads of an earlier wave consuming it, may be: a
// wave-1 workload holds its rollout, and says why; once courier may list
// in b (nothing consumes the change there), it rolls out.
func TestAWaveWaitsForAWatchedNamespaceCourierCannotList(t *testing.T) {
	tid := testID()
	a := newNamespace(t, "blind-a", map[string]string{"test": tid})
	b := newNamespace(t, "blind-b", map[string]string{"test": tid})
	own := newNamespace(t, "courier-blind", nil)
	sa := "courier-blind-" + tid
	id := scopedIdentity(t, sa, scopedRules(t), a, own) // none in b
	c := startCourierAs(t, id, nil, "--namespace="+own, "--watch-namespaces="+a+","+b, "--source-namespaces="+a, "--reload-debounce=200ms")
	c.WaitLeader(t.Context())
	createSecret(t, a, "ca", withAnnotation(keyReplicateTo, "test="+tid), withAnnotation(keyReload, "true"), withData("crt", "v1"))
	waveDeployment(t, a, "api", "1", nil) // consumes the source itself

	updateSecret(t, a, "ca", func(x *corev1.Secret) { x.Data["crt"] = []byte("v2") })
	// What it says, not how soon: under CI's load (stop 65), once
	// no such Event came within converge (and what did was not printed).
	eventually(t, 30*time.Second, "api told what it waits for", saying(a, "api", "ReloadWaiting", "namespace "+b+" (courier cannot list there now"))
	noRollout(t, a, "api", 1)

	scopedIdentity(t, sa, scopedRules(t), b) // courier may list in b now
	eventually(t, 30*time.Second, "api rolled out once courier could see b", func(ctx context.Context) (bool, error) {
		n, err := replicaSets(ctx, a, "api")
		return n == 2, err
	})
	eventually(t, converge, "the replica in b", secretIn(b, "ca", map[string][]byte{"crt": []byte("v2")}))
}
