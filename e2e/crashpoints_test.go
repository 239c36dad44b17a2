package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/courier-k8s/courier/e2e/oracle"
)

// condition is what a test waits for.
type condition = func(context.Context) (bool, error)

// crashStep is one action of the user's, returning what to wait for before
// the next (nil: nothing).
type crashStep = func(t *testing.T, r *crashRun) condition

// crashScenario is a user's story courier must get right wherever it is
// killed: namespaces and objects made before courier starts, then steps
// (each waits for what courier must have done before the user goes on),
// then the state that must hold in the end.
type crashScenario struct {
	name string
	// setup makes the scenario's namespaces and objects and returns its
	// namespaces and the arguments courier runs with.
	setup func(t *testing.T, r *crashRun) []string
	// steps are the user's actions after courier started.
	steps []crashStep
	// settled is the end state courier must reach and keep.
	settled func(r *crashRun) condition
	// standby runs a second courier on the Lease once the first leads, so
	// a crash is a leader handover rather than a restart.
	standby bool
}

// crashRun is one run of a scenario.
type crashRun struct {
	id         string
	courierNS  string
	namespaces []string // the scenario's, courier's among them
	args       []string
	values     map[string]string // Secret name → the value the scenario last wrote
	written    []string          // every value the scenario wrote
	// rollouts is how many rollouts each workload ("deployments ns/name")
	// must have had in the end: one per change of what it consumes.
	rollouts map[string]int
}

// value sets the value of Secret name: what no log line or Event may hold.
func (r *crashRun) value(name, v string) string {
	r.values[name] = v
	r.written = append(r.written, v)
	recordValues(map[string][]byte{name: []byte(v)})
	return v
}

// targets makes a namespace per value, labelled crash-<id>=value, and
// returns the label's key and the namespaces.
func (r *crashRun) targets(t *testing.T, values ...string) (label string, nss []string) {
	t.Helper()
	label = "crash-" + r.id
	for _, v := range values {
		nss = append(nss, newNamespace(t, "crash-to", map[string]string{label: v}))
	}
	return label, nss
}

// data is Secret name's data as the scenario last wrote it.
func (r *crashRun) data(name string) map[string][]byte {
	return map[string][]byte{"k": []byte(r.values[name])}
}

// crashBound is how long courier has, after a crash, to finish what the
// user asked: the dead leader's Lease expiring (crashLease) and then the
// spec's one second per step, with slack for the race detector.
const (
	crashLease = 4 * time.Second
	crashBound = crashLease + 10*time.Second
	// protectedGap bounds how long a protected source may be gone: the
	// same, plus courier's start.
	protectedGap = crashBound + 5*time.Second
)

// crashQuiet is how long a settled scenario is watched for writes courier
// must not make: longer than the reload debounce (2 s), after which a
// pending rollout would be written, and than the guard's longest retry
// (5 s), after which a failed restore or revert would be tried again.
const crashQuiet = 6 * time.Second

// runCrashPoint runs sc, killing courier after its k-th write (0: never)
// and starting it again, and returns courier's writes (as the proxy
// counted them) and the oracle's violations.
func runCrashPoint(t *testing.T, sc crashScenario, bin string, k int) (writes []string, violations []oracle.Violation) {
	t.Helper()
	mark := auditMark(t)
	r := &crashRun{id: testID(), values: map[string]string{}, rollouts: map[string]int{}}
	r.courierNS = newNamespace(t, "crash", nil)
	r.namespaces = append(sc.setup(t, r), r.courierNS)
	fp := newFaultProxy(t)
	args := append([]string{"--namespace=" + r.courierNS, "--kubeconfig=" + fp.kubeconfig(t, courierIdentity()),
		"--lease-duration=" + crashLease.String(), "--renew-deadline=1500ms", "--retry-period=400ms"}, r.args...)
	p := startCourierFrom(t, bin, courierIdentity(), nil, args...)
	fp.arm(p, k)
	procs := []*courierProcess{p}
	if sc.standby {
		// The standby talks to the API server directly: the proxy's kill
		// is for the leader.
		if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, killed := fp.state()
			led, _ := p.isLeader(ctx)
			return killed || led, nil
		}); err != nil {
			t.Fatalf("courier never led: %v", err)
		}
		direct := slices.DeleteFunc(slices.Clone(args), func(a string) bool { return strings.HasPrefix(a, "--kubeconfig=") })
		standby := startCourierFrom(t, bin, courierIdentity(), nil, direct...)
		defer standby.Stop()
		procs = append(procs, standby)
	}
	restarted := false
	// restart starts courier again once the proxy has killed it.
	restart := func() {
		if _, killed := fp.state(); killed && !restarted {
			restarted = true
			p = startCourierFrom(t, bin, courierIdentity(), nil, args...)
			procs = append(procs, p)
		}
	}
	// A scenario courier does not finish is a violation like any other;
	// the oracle still judges what it wrote.
	await := func(what string, cond condition) bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 2*crashBound)
		defer cancel()
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			restart()
			return cond(ctx)
		})
		if err != nil {
			w, killed := fp.state()
			violations = append(violations, oracle.Violation{
				Rule:    fmt.Sprintf("%s never came (%v)", what, err),
				Request: fmt.Sprintf("crash point %d, killed: %v, writes %q", k, killed, w)})
		}
		return err == nil
	}
	done := true
	for i, step := range sc.steps {
		if cond := step(t, r); cond != nil && !await(fmt.Sprintf("step %d", i+1), cond) {
			done = false
			break
		}
	}
	// Settled means courier leads again too: a new term starts with writes
	// of its own (the published settings).
	done = done && await("the end state", allOf(sc.settled(r), func(ctx context.Context) (bool, error) { return leads(ctx, procs) }))
	// A crash point counts as tried only if courier was killed there.
	if w, killed := fp.state(); k > 0 && !killed {
		t.Logf("crash point %d not reached: this run made %d writes", k, len(w))
	} else if k > 0 {
		chaos.crashPoints.Add(1)
	}
	settledAt := time.Now()
	time.Sleep(crashQuiet)
	if ok, err := sc.settled(r)(t.Context()); done && (!ok || err != nil) {
		violations = append(violations, oracle.Violation{Rule: fmt.Sprintf("the end state did not hold (%v)", err), Request: fmt.Sprintf("crash point %d", k)})
	}
	p.Stop()
	events := auditSince(t, mark)
	scope := oracle.Scope{
		Courier:      courierIdentity().user(),
		Installation: r.courierNS,
		Namespaces:   map[string]bool{},
		ProtectedGap: protectedGap,
	}
	for _, ns := range r.namespaces {
		scope.Namespaces[ns] = true
	}
	scope.Values = r.written
	violations = append(violations, oracle.Check(events, scope, time.Now())...)
	if done { // once settled, courier writes nothing
		violations = append(violations, writesOnceSettled(events, scope, settledAt)...)
	}
	// Every rollout the scenario asked for, and no other.
	got := oracle.Rollouts(events, scope.Courier, scope.Namespaces)
	for w, n := range got {
		if n != r.rollouts[w] {
			violations = append(violations, oracle.Violation{Rule: fmt.Sprintf("%d rollouts of %s for %d changes of what it consumes", n, w, r.rollouts[w]), Request: "all"})
		}
	}
	for w, n := range r.rollouts {
		if got[w] == 0 && n > 0 {
			violations = append(violations, oracle.Violation{Rule: fmt.Sprintf("no rollout of %s for %d changes of what it consumes", w, n), Request: "none"})
		}
	}
	writes, _ = fp.state()
	// The oracle judged what the proxy saw: a log that missed courier's
	// writes would pass anything.
	var audited []string
	for _, e := range oracle.Writes(events, scope.Courier, time.Time{}, nil) {
		if e.Ref.Resource != "events" {
			audited = append(audited, e.String())
		}
	}
	if len(audited) < len(writes) {
		t.Fatalf("the audit log holds %d of courier's writes, the proxy counted %d: the oracle cannot judge\naudited: %q\ncounted: %q", len(audited), len(writes), audited, writes)
	}
	return writes, violations
}

// testCrashPoints runs sc once without a crash to count its writes W, then
// once per crash point 1..W, and fails on any violation.
func testCrashPoints(t *testing.T, sc crashScenario) {
	writes, v := runCrashPoint(t, sc, env.courier, 0)
	reportViolations(t, sc.name+", no crash", v)
	t.Logf("%s: %d writes: %q", sc.name, len(writes), writes)
	if len(writes) == 0 {
		t.Fatal("the scenario made no write: nothing to crash after")
	}
	for k := 1; k <= len(writes); k++ {
		t.Run(fmt.Sprintf("crash after write %d", k), func(t *testing.T) {
			_, v := runCrashPoint(t, sc, env.courier, k)
			reportViolations(t, fmt.Sprintf("%s, killed after write %d (%s)", sc.name, k, writes[k-1]), v)
		})
	}
}

// replicateScenario: a source replicated to three namespaces.
func replicateScenario() crashScenario {
	return crashScenario{
		name: "a source to three namespaces",
		setup: func(t *testing.T, r *crashRun) []string {
			label, nss := r.targets(t, "yes", "yes", "yes")
			createSecret(t, r.courierNS, "src", withAnnotation("courier.dev/replicate-to", label), withData("k", r.value("src", "v-"+r.id)))
			return nss
		},
		settled: func(r *crashRun) condition {
			return replicasIn(r, "src", r.namespaces[:3])
		},
	}
}

// protectedScenario: a protected source replicated to two namespaces,
// deleted by a user and restored by courier (backup, then the source, and
// its replicas kept).
func protectedScenario() crashScenario {
	return crashScenario{
		name: "a protected source deleted and restored",
		setup: func(t *testing.T, r *crashRun) []string {
			label, nss := r.targets(t, "yes", "yes")
			createSecret(t, r.courierNS, "src", withAnnotation("courier.dev/replicate-to", label),
				withLabel("courier.dev/protect", "true"), withData("k", r.value("src", "p-"+r.id)))
			return nss
		},
		steps: []crashStep{
			func(t *testing.T, r *crashRun) condition {
				return allOf(replicasIn(r, "src", r.namespaces[:2]),
					secretIn(r.courierNS, "courier-backup.src", r.data("src")))
			},
			func(t *testing.T, r *crashRun) condition {
				deleteSecret(t, r.courierNS, "src")
				return nil
			},
		},
		settled: func(r *crashRun) condition {
			return allOf(secretIn(r.courierNS, "src", r.data("src")),
				replicasIn(r, "src", r.namespaces[:2]))
		},
	}
}

// conflictScenario: a source replicated to two namespaces, one of which
// holds a Secret of its name that a user made: courier must leave it as it
// is (a ReplicaConflict) and fill the other.
func conflictScenario() crashScenario {
	return crashScenario{
		name: "a source whose name is taken in one target",
		setup: func(t *testing.T, r *crashRun) []string {
			label, nss := r.targets(t, "yes", "yes")
			createSecret(t, nss[1], "src", withData("k", r.value("mine", "m-"+r.id)))
			createSecret(t, r.courierNS, "src", withAnnotation("courier.dev/replicate-to", label), withData("k", r.value("src", "c-"+r.id)))
			return nss
		},
		settled: func(r *crashRun) condition {
			return allOf(replicasIn(r, "src", r.namespaces[:1]),
				secretIn(r.namespaces[1], "src", r.data("mine")),
				eventWith(r.courierNS, "src", "ReplicaConflict", r.namespaces[1]))
		},
	}
}

// reloadScenario: a Deployment that consumes a Secret's key and opts in;
// the Secret changes once, so it rolls out exactly once.
func reloadScenario() crashScenario {
	return crashScenario{
		name: "one change to a reloaded Deployment's input",
		setup: func(t *testing.T, r *crashRun) []string {
			ns := newNamespace(t, "crash-app", nil)
			createSecret(t, ns, "in", withData("k", r.value("in", "r1-"+r.id)))
			createDeployment(t, ns, "app", map[string]string{"courier.dev/reload": "true"}, podSpec([]corev1.EnvVar{keyRef("secret", "in", "k")}, nil, nil))
			r.rollouts["deployments "+ns+"/app"] = 1
			return []string{ns}
		},
		steps: []crashStep{
			func(t *testing.T, r *crashRun) condition {
				return deploymentHas(r.namespaces[0], "app", "courier.dev/config-inputs", false)
			},
			func(t *testing.T, r *crashRun) condition {
				v := r.value("in", "r2-"+r.id)
				updateSecret(t, r.namespaces[0], "in", func(s *corev1.Secret) { s.Data["k"] = []byte(v) })
				return nil
			},
		},
		settled: func(r *crashRun) condition {
			return deploymentHas(r.namespaces[0], "app", "courier.dev/config-hash", true)
		},
	}
}

// deploymentHas: the Deployment carries annotation key (on its pod
// template when template is true).
func deploymentHas(ns, name, key string, template bool) condition {
	return func(ctx context.Context) (bool, error) {
		d, err := admin().AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		a := d.Annotations
		if template {
			a = d.Spec.Template.Annotations
		}
		return a[key] != "", nil
	}
}

// relabelScenario: a source over a label selector; two namespaces change
// labels, so one replica is deleted and another created.
func relabelScenario() crashScenario {
	return crashScenario{
		name: "a relabel that adds one target and removes another",
		setup: func(t *testing.T, r *crashRun) []string {
			label, nss := r.targets(t, "yes", "no", "yes")
			createSecret(t, r.courierNS, "src", withAnnotation("courier.dev/replicate-to", label+"=yes"), withData("k", r.value("src", "l-"+r.id)))
			return nss
		},
		steps: []crashStep{
			func(t *testing.T, r *crashRun) condition {
				return replicasIn(r, "src", []string{r.namespaces[0], r.namespaces[2]})
			},
			func(t *testing.T, r *crashRun) condition {
				setNamespaceLabels(t, r.namespaces[0], func(l map[string]string) { l["crash-"+r.id] = "no" })
				setNamespaceLabels(t, r.namespaces[1], func(l map[string]string) { l["crash-"+r.id] = "yes" })
				return nil
			},
		},
		settled: func(r *crashRun) condition {
			return allOf(replicasIn(r, "src", r.namespaces[1:3]), secretGone(r.namespaces[0], "src"))
		},
	}
}

// pullScenario: under --compat=replicator, an object that pulls a source
// (kubernetes-replicator's replicate-from) is filled, keeps its owner's
// labels, and follows a change of the source.
func pullScenario() crashScenario {
	return crashScenario{
		name: "a pull, then a change of its source",
		setup: func(t *testing.T, r *crashRun) []string {
			r.args = []string{"--compat=replicator"}
			ns := newNamespace(t, "crash-pull", nil)
			createSecret(t, r.courierNS, "src", withAnnotation("replicator.v1.mittwald.de/replication-allowed", "true"),
				withAnnotation("replicator.v1.mittwald.de/replication-allowed-namespaces", ns), withData("k", r.value("src", "u1-"+r.id)))
			createSecret(t, ns, "dst", withAnnotation("replicator.v1.mittwald.de/replicate-from", r.courierNS+"/src"), withLabel("team", "pay"))
			return []string{ns}
		},
		steps: []crashStep{
			func(t *testing.T, r *crashRun) condition {
				return secretIn(r.namespaces[0], "dst", r.data("src"))
			},
			func(t *testing.T, r *crashRun) condition {
				v := r.value("src", "u2-"+r.id)
				updateSecret(t, r.courierNS, "src", func(s *corev1.Secret) { s.Data["k"] = []byte(v) })
				return nil
			},
		},
		settled: func(r *crashRun) condition {
			return allOf(secretIn(r.namespaces[0], "dst", r.data("src")),
				func(ctx context.Context) (bool, error) {
					s, err := getSecret(ctx, r.namespaces[0], "dst")
					return err == nil && s.Labels["team"] == "pay", err
				})
		},
	}
}

// handoverScenario: replicateScenario with a standby courier, so every
// crash point is a leader handover in the middle of the leader's writes.
func handoverScenario() crashScenario {
	sc := replicateScenario()
	sc.name, sc.standby = "a leader handover in the middle of replicating a source", true
	return sc
}

// leads reports whether a courier process still running leads.
func leads(ctx context.Context, procs []*courierProcess) (bool, error) {
	for _, p := range procs {
		if led, _ := p.isLeader(ctx); led && !p.Exited() {
			return true, nil
		}
	}
	return false, nil
}

// replicasIn: every namespace in nss holds a replica of the courier
// namespace's Secret name, equal to it.
func replicasIn(r *crashRun, name string, nss []string) condition {
	var conds []condition
	for _, ns := range nss {
		conds = append(conds, secretIn(ns, name, r.data(name)))
	}
	return allOf(conds...)
}

func allOf(conds ...condition) condition {
	return func(ctx context.Context) (bool, error) {
		for _, c := range conds {
			if ok, err := c(ctx); !ok || err != nil {
				return ok, err
			}
		}
		return true, nil
	}
}

// TestCrashPointsOfReplication kills courier after each write it makes
// replicating a source to three namespaces, starts it again, and lets the
// audit-log oracle judge every write and the end state.
func TestCrashPointsOfReplication(t *testing.T) {
	testCrashPoints(t, replicateScenario())
}

// TestCrashPointsOfAProtectedSourcesRestore does the same for a protected
// source deleted by a user: backup, replicas, the restore.
func TestCrashPointsOfAProtectedSourcesRestore(t *testing.T) {
	testCrashPoints(t, protectedScenario())
}

// TestCrashPointsOfAReload does the same for one change to an input of a
// reloaded Deployment: exactly one rollout wherever courier dies.
func TestCrashPointsOfAReload(t *testing.T) {
	testCrashPoints(t, reloadScenario())
}

// TestCrashPointsOfEveryOtherScenario runs make chaos's other scenarios: a
// relabel, a pull, a leader handover mid-write and a source whose name is
// taken in a target.
func TestCrashPointsOfEveryOtherScenario(t *testing.T) {
	if !chaosAll() {
		t.Skip("make chaos runs these scenarios (COURIER_CHAOS set); make test runs the three above")
	}
	for _, sc := range []crashScenario{relabelScenario(), pullScenario(), handoverScenario(), conflictScenario()} {
		t.Run(sc.name, func(t *testing.T) { testCrashPoints(t, sc) })
	}
}
