package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// move is a change a dashboard query must show over one step, in words (for
// failures) and as a test of its value before and after.
type move struct {
	what string
	// quiet: before the step the series must read below min or nothing (an
	// earlier step's rate must fade first), so the move is the step's.
	quiet bool
	min   float64
	ok    func(before, after float64) bool
}

// fromBelow is a move from below min (or no data) to at least min: a rate
// or quantile the step's event starts.
func fromBelow(min float64) move {
	return move{what: fmt.Sprintf("from below %g to at least %g", min, min), quiet: true, min: min,
		ok: func(_, after float64) bool { return after >= min }}
}

// growsBy is a move of a gauge by at least d.
func growsBy(d float64) move {
	return move{what: fmt.Sprintf("grows by at least %g", d), ok: func(before, after float64) bool {
		if math.IsNaN(before) {
			before = 0
		}
		return after >= before+d
	}}
}

// reads is a series that must read v after the step.
func reads(v float64) move {
	return move{what: fmt.Sprintf("reads %g", v), ok: func(_, after float64) bool { return after == v }}
}

// panelMove is a move the series of one panel query (by the panel's title
// and the query's index in it) whose labels include labels must show.
type panelMove struct {
	panel  string
	query  int
	labels map[string]string
	move   move
}

// dashboardStep is one event a user would look for on the dashboard or be
// alerted to: drive makes it happen, moves are what the panels show of it,
// and alerts the state each named rule must reach ("pending" for a rule
// with a for: clause, "firing" without one, "" for no longer active).
type dashboardStep struct {
	name   string
	drive  func(t *testing.T)
	moves  []panelMove
	alerts map[string]string
}

// TestEveryDashboardPanelAndAlertMovesWithItsEvent runs courier (a leader and
// a standby) under a real Prometheus, drives one by one the events the
// shipped dashboard and alert rules are there to show — a replica written,
// a change rolled out, a conflict, failed writes, reverts and a contested
// fight, a restore, an invalid selector, a refused rollout, a flapping
// input, a change halted between rollout waves, a replica written into
// another cluster, throttled work, a growing cache, a leader change, every process
// down, a Lease held by a process that does nothing, a watched namespace
// courier may not list in — and checks after each
// that every panel query meant to show it moves as it should (a rate or
// quantile from quiet to at least a value, a gauge by at least an amount)
// and that each alert meant to catch it becomes pending or fires. Every
// panel query and every alert rule must be moved by some step, so a new
// panel or rule needs an event here.
func TestEveryDashboardPanelAndAlertMovesWithItsEvent(t *testing.T) {
	namespacesGoneAtCleanup(t)
	// A slow client (10 requests a second) and two replicator workers make
	// throttling and queueing visible; a short storm window makes a
	// flapping input trip the breaker.
	args := []string{"--reload-debounce=200ms", "--reload-storm-changes=3", "--reload-storm-window=1m",
		"--kube-api-qps=10", "--kube-api-burst=2", "--replicator-workers=2"}
	s := setupReplication(t, args...)
	standby := startCourier(t, append([]string{"--namespace=" + s.courier.namespace, "--source-namespaces=" + s.src}, args...)...)
	standby.WaitReady(t.Context())
	prom := startPrometheus(t, writeAlertRules(t, t.TempDir()), s.courier.addr, standby.addr)
	// Grafana's $__rate_interval is at least four scrape intervals; 5 s
	// lets one step's rates fade before the next.
	queries := dashboardQueries(t, "courier-metrics", "5s")
	leader := map[string]string{"instance": s.courier.addr}
	secret := func(more ...string) map[string]string {
		l := map[string]string{"kind": "Secret"}
		for i := 0; i+1 < len(more); i += 2 {
			l[more[i]] = more[i+1]
		}
		return l
	}
	version, goversion := courierVersion(t)

	var a string
	steps := []dashboardStep{{
		name: "courier runs",
		moves: []panelMove{{"Build", 0, map[string]string{"instance": s.courier.addr, "version": version, "goversion": goversion}, reads(1)},
			{"Build", 0, map[string]string{"instance": standby.addr, "version": version, "goversion": goversion}, reads(1)},
			{"Leader", 0, leader, reads(1)},
			{"Leader", 0, map[string]string{"instance": standby.addr}, reads(0)}},
	}, {
		name: "a replica written",
		drive: func(t *testing.T) {
			a = s.target(t, "a", nil)
			createSecret(t, s.src, "app", withAnnotation(keyReplicateTo, "test="+s.id), withAnnotation(keyReload, "true"), withData("k", "1"))
			createDeployment(t, a, "web", nil, podSpec([]corev1.EnvVar{keyRef("secret", "app", "k")}, nil, nil))
			eventually(t, converge, "replica", secretIn(a, "app", map[string][]byte{"k": []byte("1")}))
			settled(t, a, "web")
		},
		moves: []panelMove{
			{"Replicas by state", 0, secret("state", "in_sync"), growsBy(1)},
			{"Replica writes", 0, secret("operation", "create"), fromBelow(0.01)},
			{"API requests", 0, map[string]string{"method": "POST", "code": "201"}, fromBelow(0.01)},
		},
	}, {
		name: "a source change rolled out",
		drive: func(t *testing.T) {
			updateSecret(t, s.src, "app", func(x *corev1.Secret) { x.Data["k"] = []byte("2") })
			rolledOutOnce(t, a, "web", 1, "secret/app")
		},
		moves: []panelMove{
			{"Replication latency (source change → replica written)", 0, nil, fromBelow(1e-6)},
			{"Replication latency (source change → replica written)", 1, nil, fromBelow(1e-6)},
			{"Replica writes", 0, secret("operation", "update"), fromBelow(0.01)},
			{"Reloads", 0, map[string]string{"kind": "Deployment", "result": "success"}, fromBelow(0.01)},
			{"Reload latency (input change → rollout patch)", 0, nil, fromBelow(1e-6)},
			{"Reload latency (input change → rollout patch)", 1, nil, fromBelow(1e-6)},
			{"API requests", 0, map[string]string{"method": "PATCH", "code": "200"}, fromBelow(0.01)},
		},
	}, {
		// Before the reverts below, which make the replica flap too.
		name: "an input that changes too often",
		drive: func(t *testing.T) {
			ns := configConsumer(t, "flap")
			for i := range 5 { // more than --reload-storm-changes, each beyond the debounce
				updateConfigMap(t, ns, "cfg", func(c *corev1.ConfigMap) { c.Data["k"] = fmt.Sprint(i + 1) })
				time.Sleep(500 * time.Millisecond)
			}
		},
		alerts: map[string]string{"CourierReloadsSuppressed": "firing"},
	}, {
		name: "a change halted between rollout waves",
		drive: func(t *testing.T) {
			ns := newNamespace(t, "waves", nil)
			createSecret(t, ns, "ca", withAnnotation(keyReload, "true"), withData("crt", "1"))
			waveDeployment(t, ns, "web", "0", func(d *appsv1.Deployment) { d.Spec.ProgressDeadlineSeconds = ptr.To[int32](2) })
			waveDeployment(t, ns, "api", "1", nil)
			nowhere(t, ns, "web", true)
			updateSecret(t, ns, "ca", func(x *corev1.Secret) { x.Data["crt"] = []byte("2") })
			eventually(t, 30*time.Second, "api halted", eventWith(ns, "api", "ReloadHalted"))
		},
		moves: []panelMove{
			// From quiet: the rollouts of the steps before must be healthy first.
			{"Rollout waves and budget", 0, nil, fromBelow(1)},
			{"Rollout waves and budget", 1, nil, fromBelow(1)},
			{"Rollout waves and budget", 2, nil, fromBelow(1)},
		},
		alerts: map[string]string{"CourierReloadHalted": "firing"},
	}, {
		name: "a replica's name held by a Secret courier did not make",
		drive: func(t *testing.T) {
			blocked := newNamespace(t, "blocked", nil)
			createSecret(t, blocked, "app", withData("mine", "x"))
			setNamespaceLabels(t, blocked, func(l map[string]string) { l["test"] = s.id })
		},
		moves: []panelMove{
			{"Conflicts", 0, secret(), fromBelow(0.01)},
			{"Replicas by state", 0, secret("state", "conflict"), growsBy(1)},
		},
		alerts: map[string]string{"CourierReplicaConflicts": "pending"},
	}, {
		// Eight targets whose quota allows no Secret: more than one failed
		// sync per 10 s over CourierSyncErrors' 5-minute window.
		name: "replica writes refused by a quota",
		drive: func(t *testing.T) {
			for range 8 {
				full := newNamespace(t, "full", nil)
				noSecretsAllowed(t, full)
				setNamespaceLabels(t, full, func(l map[string]string) { l["test"] = s.id })
			}
		},
		moves: []panelMove{
			{"Sync errors and invalid selectors", 0, secret(), fromBelow(0.01)},
			{"Replicas by state", 0, secret("state", "error"), growsBy(8)},
			{"API requests", 0, map[string]string{"method": "POST", "code": "403"}, fromBelow(0.01)},
		},
		alerts: map[string]string{"CourierReplicasOutOfSync": "pending", "CourierSyncErrors": "pending"},
	}, {
		name: "a replica edited six times: five reverts, then contested",
		drive: func(t *testing.T) {
			for i := range 6 {
				updateSecret(t, a, "app", func(x *corev1.Secret) { x.Data["k"] = []byte(fmt.Sprint("edit-", i)) })
				if i < 5 {
					eventually(t, converge, fmt.Sprintf("edit %d reverted", i+1), secretIn(a, "app", map[string][]byte{"k": []byte("2")}))
				}
			}
		},
		moves: []panelMove{
			{"Reverts, contested replicas, restored sources", 0, secret(), fromBelow(0.01)},
			{"Reverts, contested replicas, restored sources", 1, secret(), fromBelow(0.01)},
			{"Replicas by state", 0, secret("state", "contested"), growsBy(1)},
		},
		alerts: map[string]string{"CourierReplicasContested": "firing"},
	}, {
		name: "a protected source deleted",
		drive: func(t *testing.T) {
			createSecret(t, s.src, "kept", withLabel(keyProtect, "true"), withData("k", "v"))
			eventually(t, converge, "the guard backed up the protected source", func(ctx context.Context) (bool, error) {
				_, err := getSecret(ctx, s.src, "courier-backup.kept")
				return err == nil, nil
			})
			deleteSecret(t, s.src, "kept")
			eventually(t, converge, "protected source restored", secretIn(s.src, "kept", map[string][]byte{"k": []byte("v")}))
		},
		moves: []panelMove{{"Reverts, contested replicas, restored sources", 2, secret(), fromBelow(0.01)}},
	}, {
		name:  "an invalid selector",
		drive: func(t *testing.T) { createSecret(t, s.src, "broken", withAnnotation(keyReplicateTo, "((")) },
		moves: []panelMove{{"Sync errors and invalid selectors", 1, secret(), fromBelow(0.01)}},
	}, {
		name: "a rollout refused by an admission policy",
		drive: func(t *testing.T) {
			ns := configConsumer(t, "stuck")
			frozenPodTemplates(t, ns)
			updateConfigMap(t, ns, "cfg", func(c *corev1.ConfigMap) { c.Data["k"] = "changed" })
		},
		moves:  []panelMove{{"Reloads", 0, map[string]string{"kind": "Deployment", "result": "error"}, fromBelow(0.01)}},
		alerts: map[string]string{"CourierReloadErrors": "pending"},
	}, {
		// 30 replicas at 10 requests a second: keys wait in the queue,
		// requests in the client's rate limiter.
		name: "one source to 30 new namespaces through a slow client",
		drive: func(t *testing.T) {
			var targets []string
			for range 30 {
				targets = append(targets, newNamespace(t, "wide", map[string]string{"wide": s.id}))
			}
			createSecret(t, s.src, "wide", withAnnotation(keyReplicateTo, "wide="+s.id), withData("k", "v"))
			for _, ns := range targets {
				eventually(t, 30*time.Second, "replica in "+ns, secretIn(ns, "wide", map[string][]byte{"k": []byte("v")}))
			}
		},
		moves: []panelMove{
			{"Queue depth", 0, map[string]string{"name": "replicator"}, fromBelow(5)},
			{"Queue wait (p99)", 0, map[string]string{"name": "replicator"}, fromBelow(0.5)},
			{"Work duration (p99)", 0, map[string]string{"name": "replicator"}, fromBelow(0.05)},
			{"Client-side throttling (p99 wait)", 0, map[string]string{"verb": "POST"}, fromBelow(0.05)},
		},
	}, {
		// Sources' values are cached (other Secrets only as digests): 64
		// sources of 512 KiB are 32 MiB in each process's cache.
		name: "32 MiB of sources cached",
		drive: func(t *testing.T) {
			big := string(bytes.Repeat([]byte("x"), 512<<10))
			for i := range 64 {
				createSecret(t, s.src, fmt.Sprint("big-", i), withAnnotation(keyReplicateTo, "nowhere="+s.id), withData("k", big))
			}
		},
		moves: []panelMove{
			{"Memory", 0, leader, growsBy(8 << 20)},
			{"Memory", 1, leader, growsBy(16 << 20)},
		},
	}, {
		name: "a replica written into another cluster",
		drive: func(t *testing.T) {
			r := startRemote(t)
			ns := r.namespace(t, "far", map[string]string{"far": s.id})
			addCluster(t, s.courier, r, "dash", nil)
			// Its series start at 0 once the cluster is usable; a rate needs
			// Prometheus to have seen that 0 before the first write.
			eventually(t, 30*time.Second, "the cluster's series scraped at 0", func(ctx context.Context) (bool, error) {
				v, err := prom.value(ctx, `sum(courier_replicator_cluster_writes_total{cluster="dash",operation="create"})`, nil)
				return err == nil && v == 0, nil
			})
			createSecret(t, s.src, "far", withAnnotation(keyReplicateTo, "far="+s.id), withAnnotation(keyReplicateToClusters, "*"), withData("k", "v"))
			eventually(t, 30*time.Second, "replica in the other cluster", r.secretIn(ns, "far", map[string][]byte{"k": []byte("v")}))
		},
		moves: []panelMove{
			{"Clusters reachable", 0, map[string]string{"cluster": "dash"}, reads(1)},
			{"Replicas in other clusters by state", 0, map[string]string{"cluster": "dash", "state": "in_sync"}, growsBy(1)},
			{"Replica writes by cluster", 0, map[string]string{"cluster": "dash", "operation": "create"}, fromBelow(0.01)},
			{"Replication latency by cluster (p99)", 0, map[string]string{"cluster": "dash"}, fromBelow(1e-6)},
		},
	}, {
		name:  "the leader killed",
		drive: func(t *testing.T) { s.courier.Signal(syscall.SIGKILL) },
		moves: []panelMove{{"Leader", 0, map[string]string{"instance": standby.addr}, fromBelow(1)}},
	}, {
		name:   "every process down",
		drive:  func(t *testing.T) { standby.Signal(syscall.SIGKILL) },
		alerts: map[string]string{"CourierDown": "pending"},
	}, {
		name: "a Lease held by a process that does nothing",
		drive: func(t *testing.T) {
			holdLease(t, s.courier.namespace, "stuck-pod")
			c := startCourier(t, append([]string{"--namespace=" + s.courier.namespace, "--source-namespaces=" + s.src}, args...)...)
			c.WaitReady(t.Context())
			prom.scrape(t, c.addr)
		},
		alerts: map[string]string{"CourierNoLeader": "pending", "CourierDown": ""},
	}, {
		// Last: this courier leads a Lease of its own, which would keep
		// CourierNoLeader and CourierDown from firing above.
		name: "a watched namespace courier may not list in",
		drive: func(t *testing.T) {
			own := newNamespace(t, "courier-dash", nil)
			served := newNamespace(t, "dash-served", nil)
			refused := newNamespace(t, "dash-refused", nil) // no Role there
			id := scopedIdentity(t, "courier-dash-"+s.id, scopedRules(t), own, served)
			c := startCourierAs(t, id, nil, "--namespace="+own, "--watch-namespaces="+served+","+refused)
			c.WaitReady(t.Context())
			prom.scrape(t, c.addr)
		},
		alerts: map[string]string{"CourierWatchNamespaceUnavailable": "pending"},
	}}

	checkEveryPanelAndRuleIsMoved(t, steps, queries, prom.alertRules(t))
	for _, st := range steps {
		t.Logf("step: %s", st.name)
		before := make([]float64, len(st.moves))
		for i, m := range st.moves {
			q := queries[m.panel][m.query]
			if !m.move.quiet {
				v, err := prom.value(t.Context(), q, m.labels)
				if err != nil {
					t.Fatal(err)
				}
				before[i] = v
				continue
			}
			eventually(t, 30*time.Second, fmt.Sprintf("panel %q query %d %v quiet before %q", m.panel, m.query, m.labels, st.name), func(ctx context.Context) (bool, error) {
				v, err := prom.value(ctx, q, m.labels)
				before[i] = v
				return err == nil && !(v >= m.move.min), err
			})
		}
		for name, want := range st.alerts {
			if got, err := prom.alertState(t.Context(), name); err != nil || got == want {
				t.Fatalf("before %q: alert %s is already %q (%v)", st.name, name, got, err)
			}
		}
		if st.drive != nil {
			st.drive(t)
		}
		for i, m := range st.moves {
			q := queries[m.panel][m.query]
			after := math.NaN()
			eventually(t, 45*time.Second, fmt.Sprintf("after %q: panel %q query %d %v moves %s (before: %g)", st.name, m.panel, m.query, m.labels, m.move.what, before[i]),
				func(ctx context.Context) (bool, error) {
					v, err := prom.value(ctx, q, m.labels)
					after = v
					return err == nil && m.move.ok(before[i], v), err
				})
			t.Logf("  panel %q query %d %v: %g → %g", m.panel, m.query, m.labels, before[i], after)
		}
		for name, want := range st.alerts {
			eventually(t, 45*time.Second, fmt.Sprintf("after %q: alert %s %q", st.name, name, want), func(ctx context.Context) (bool, error) {
				got, err := prom.alertState(ctx, name)
				return got == want, err
			})
			t.Logf("  alert %s: %q", name, want)
		}
	}
}

// checkEveryPanelAndRuleIsMoved fails the test unless every panel query
// and every alert rule has a step that moves it.
func checkEveryPanelAndRuleIsMoved(t *testing.T, steps []dashboardStep, queries map[string][]string, rules []string) {
	t.Helper()
	moved, alerted := map[string]bool{}, map[string]bool{}
	for _, st := range steps {
		for _, m := range st.moves {
			if m.query >= len(queries[m.panel]) {
				t.Fatalf("step %q names panel %q query %d: the dashboard has no such query", st.name, m.panel, m.query)
			}
			moved[fmt.Sprint(m.panel, "#", m.query)] = true
		}
		for name, state := range st.alerts {
			if state != "" {
				alerted[name] = true
			}
		}
	}
	for panel, qs := range queries {
		for i := range qs {
			if !moved[fmt.Sprint(panel, "#", i)] {
				t.Errorf("panel %q query %d (%s): no step shows it move", panel, i, qs[i])
			}
		}
	}
	for _, r := range rules {
		if !alerted[r] {
			t.Errorf("alert rule %s: no step makes it pending or firing", r)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// configConsumer makes a namespace (prefix) with ConfigMap cfg consumed by
// Deployment app, opted in, waits for its baseline and returns the namespace.
func configConsumer(t *testing.T, prefix string) string {
	t.Helper()
	ns := newNamespace(t, prefix, nil)
	createConfigMap(t, ns, "cfg", nil, map[string]string{"k": "0"})
	createDeployment(t, ns, "app", map[string]string{keyReload: "true"}, podSpec([]corev1.EnvVar{keyRef("configmap", "cfg", "k")}, nil, nil))
	settled(t, ns, "app")
	return ns
}

// courierVersion is the version and Go version `courier version` prints,
// "courier VERSION (revision R, GOVERSION)", as courier_build_info labels them.
func courierVersion(t *testing.T) (version, goversion string) {
	t.Helper()
	out, err := exec.Command(env.courier, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(strings.TrimSpace(string(out)))
	if len(f) < 3 || f[0] != "courier" {
		t.Fatalf("courier version printed %q", out)
	}
	return f[1], strings.TrimSuffix(f[len(f)-1], ")")
}

// frozenPodTemplates makes the API server refuse any change to a
// Deployment's pod template in ns (a ValidatingAdmissionPolicy, as a
// cluster's policy might), and waits until it does.
func frozenPodTemplates(t *testing.T, ns string) {
	t.Helper()
	refuse(t, "frozen-"+ns, ns, admissionv1.Update, admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
		"object.spec.template == oldObject.spec.template", "pod templates are frozen here",
		func(ctx context.Context) error {
			ds, err := admin().AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(ds.Items) == 0 {
				return fmt.Errorf("no Deployment to probe with (%v)", err)
			}
			d := ds.Items[0]
			if d.Spec.Template.Annotations == nil {
				d.Spec.Template.Annotations = map[string]string{}
			}
			d.Spec.Template.Annotations["probe"] = "x"
			_, err = admin().AppsV1().Deployments(ns).Update(ctx, &d, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		})
}

// holdLease makes courier's Lease in ns look held by holder, renewed now for
// an hour: a process that holds the Lease and does nothing.
func holdLease(t *testing.T, ns, holder string) {
	t.Helper()
	updateOnConflict(t, "hold the Lease", func(ctx context.Context) error {
		l, err := admin().CoordinationV1().Leases(ns).Get(ctx, "courier", metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewMicroTime(time.Now())
		l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now, LeaseTransitions: l.Spec.LeaseTransitions}
		_, err = admin().CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
}
