package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/courier-k8s/courier/e2e/cluster"
	"github.com/courier-k8s/courier/e2e/oracle"
	"github.com/courier-k8s/courier/e2e/trace"
)

// soakDuration is how long TestSoak runs its random operations:
// COURIER_SOAK (a Go duration; `make soak` and `make chaos` set it), else
// two minutes.
func soakDuration(t *testing.T) time.Duration {
	if v := os.Getenv("COURIER_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("COURIER_SOAK=%q: %v", v, err)
		}
		return d
	}
	return 2 * time.Minute
}

// soakSeed is the seed of TestSoak's operations: COURIER_SOAK_SEED, else
// a fixed one, so make test runs the same operations each time (their
// timing, and so what courier sees, still varies).
func soakSeed(t *testing.T) uint64 {
	seed := uint64(1)
	if v := os.Getenv("COURIER_SOAK_SEED"); v != "" {
		if _, err := fmt.Sscan(v, &seed); err != nil {
			t.Fatalf("COURIER_SOAK_SEED=%q: %v", v, err)
		}
	}
	return seed
}

// soakReplay is the trace COURIER_SOAK_TRACE names (make soak TRACE=file),
// which TestSoak then replays instead of choosing operations, or nil.
func soakReplay(t *testing.T) []trace.Op {
	path := os.Getenv("COURIER_SOAK_TRACE")
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("COURIER_SOAK_TRACE: %v", err)
	}
	defer f.Close()
	ops, err := trace.Parse(f)
	if err != nil {
		t.Fatalf("COURIER_SOAK_TRACE=%s: %v", path, err)
	}
	return ops
}

// soak is the state TestSoak keeps of what it did.
type soak struct {
	t          *testing.T
	bin        string // the courier binary both installations run
	rng        *rand.Rand
	id         string
	src        string
	namespace  string                 // courier's, the same across its restarts
	live       []string               // namespaces the test made and has not deleted
	labels     map[string]string      // namespace → its soak label value
	edits      map[string][]time.Time // namespace → when its alpha replica was edited
	changes    map[string]int         // namespace → changes of the consumed content seen there
	changedAt  map[string]time.Time   // namespace → when the last of those was made
	apps       map[string]int         // namespace with a consumer → changes before it was created
	bystanders map[string]string      // ns/name → resourceVersion of an object courier does not own
	courier    *courierProcess
	proxy      *faultProxy // between courier and the API server
	startedAt  int         // goroutines of the running courier once it led
	kills      int
	ops        map[string]int
	every      []string        // every namespace the test made
	betaKeys   bool            // beta's replicas hold only its key k (replicate-keys)
	betaCopy   bool            // beta's replicas carry its label tier (copy-labels)
	pulls      map[string]bool // namespaces holding "puller", which pulls alpha
	pullEdits  []time.Time
	values     []string // the values of the sources' edits (each a UnixNano, 19 digits)
	// The operations, in order, as the trace refers to them: refs maps
	// "n<i>", "src" and "src2" to the namespaces' names.
	trace   []trace.Op
	refs    map[string]string
	began   time.Time
	lastOp  time.Time     // when the last operation was made
	outages []oracle.Span // kube-apiserver or etcd restarted: from the restart until it served again
	// A second installation: its own identity, --namespace and source
	// namespace (src2, holding delta), replicating into the same namespaces
	// and reloading the same workloads.
	second   *courierProcess
	secondID identity
	// lag is the kube-apiserver the second installation talks to: a
	// second one on the same etcd, whose etcd traffic the soak holds for
	// a while (heldUntil), so that installation's view goes stale.
	lag       *cluster.Lagging
	heldUntil time.Time
	secondNS  string
	src2      string
	// The first installation's identity (courier's RBAC and the chart's
	// for Argo Rollouts), and the custom kind it reloads.
	firstID  identity
	rollouts schema.GroupVersionResource
	rolls    map[string]int // namespace with a Rollout consumer → changes before it was created
}

func newSoak(t *testing.T, bin string, seed uint64) *soak {
	return &soak{t: t, bin: bin, rng: rand.New(rand.NewPCG(seed, seed)), id: testID(), labels: map[string]string{},
		changes: map[string]int{}, apps: map[string]int{}, ops: map[string]int{}, edits: map[string][]time.Time{},
		pulls: map[string]bool{}, changedAt: map[string]time.Time{}, bystanders: map[string]string{}, refs: map[string]string{}}
}

// changed counts n changes of the consumed content in ns, made now.
func (k *soak) changed(ns string, n int) {
	k.changes[ns] += n
	k.changedAt[ns] = time.Now()
}

// changesBefore is the count of ns's consumed changes a consumer created now
// comes after. A change made just before may reach the replica after the
// consumer is there, and courier then rightly rolls it out: such a change
// (and its revert) counts as after. So does one whose replica is still to
// be written (replicaBehind): under a burst of edits and faults courier's
// replication can take longer than the 2 s (a 30-minute run saw 3.4 s, and
// flagged a Rollout created 2.4 s after the edit, 1 s before its replica
// was written, as rolled out once too often).
func (k *soak) changesBefore(ns string) int {
	n := k.changes[ns]
	if time.Since(k.changedAt[ns]) < 2*time.Second || k.replicaBehind(ns) {
		n -= 2
	}
	return n
}

// replicaBehind reports whether the replica ns's consumers read does not
// hold its source's content now (or either cannot be read).
func (k *soak) replicaBehind(ns string) bool {
	name, src := consumed(k.labels[ns]), k.src
	if name == "delta" {
		src = k.src2
	}
	from, err1 := getSecret(k.t.Context(), src, name)
	replica, err2 := getSecret(k.t.Context(), ns, name)
	return err1 != nil || err2 != nil || !bytes.Equal(from.Data["k"], replica.Data["k"])
}

// did records operation o, made now (at 0 before courier started), in the
// trace.
func (k *soak) did(o trace.Op) {
	k.ops[strings.TrimSpace(o.What+" "+o.Arg)]++
	chaos.transitions.Add(1)
	if !k.began.IsZero() {
		o.At = time.Since(k.began)
	}
	o.Name = k.refs[o.NS]
	k.trace = append(k.trace, o)
	k.lastOp = time.Now()
}

// selectors of the soak's sources over the label L = "soak-<id>", which
// every soak namespace carries with the value a, b or c. gamma is
// protected: deleting it is one of the operations, and courier restores it.
var soakSources = map[string]string{"alpha": "L=a", "beta": "L in (a,b)", "gamma": "L,L!=a"}

// deltaSelector is the second installation's source's: every soak namespace
// holds either alpha (L=a) or delta, and the consumers consume both.
const deltaSelector = "L in (b,c)"

// consumed is the source a namespace labelled v holds a replica of, of the
// two its consumers read.
func consumed(v string) string {
	if v == "a" {
		return "alpha"
	}
	return "delta"
}

func soakSelector(sel, label string) string { return strings.ReplaceAll(sel, "L", label) }

// TestSoak makes random changes a user or tenant can make, for a bounded
// time, with faults between them — namespaces created, relabelled and
// deleted; sources edited; a protected source deleted; replicas edited and
// deleted; consuming Deployments and Argo Rollouts created (reading
// replicas of two installations); either installation SIGKILLed and started again; the
// first's watches cut or stalled; the second's kube-apiserver (a second one on
// the same etcd) held, so its view goes stale and its writes land late;
// kube-apiserver restarted, etcd killed —
// and then checks the invariants: every targeted namespace holds a replica
// equal to its source and no other does; objects courier does not own are
// untouched; every rollout is explained by a consumed change, and one last
// change of both consumed sources rolls every consumer out; the last
// courier's goroutines did not grow from when it started leading. The
// audit-log oracle judges every write courier made meanwhile, and that it
// writes nothing once settled.
//
// A failure writes the trace of operations to .run/soak/, and that trace
// shortened to what the first violation names, which it replays at once to show
// whether it reproduces them; make soak TRACE=file replays either.
func TestSoak(t *testing.T) {
	seed, replay := soakSeed(t), soakReplay(t)
	k := newSoak(t, env.courier, seed)
	var vs []oracle.Violation
	t.Cleanup(func() {
		if t.Failed() {
			// Last, after the couriers' logs: CI shows a failing test's tail.
			for _, v := range vs {
				t.Logf("violation: %s", v)
			}
			t.Logf("seed %d: rerun these operations with COURIER_SOAK_SEED=%d COURIER_SOAK=%s, or replay them with make soak TRACE=%s",
				seed, seed, soakDuration(t), k.writeTrace("", k.trace))
		}
	})
	vs = k.run(soakDuration(t), replay)
	reportViolations(t, "soak", vs)
	if len(vs) > 0 && replay == nil {
		k.shortenAndReplay(vs)
	}
}

// run sets the soak up, makes random operations for d (or replays ops),
// lets both installations converge and returns the violations found.
func (k *soak) run(d time.Duration, ops []trace.Op) []oracle.Violation {
	t := k.t
	mark := auditMark(t)
	k.src = newNamespace(t, "soak-src", nil)
	label := "soak-" + k.id
	for name, sel := range soakSources {
		opts := []secretOpt{withAnnotation(keyReplicateTo, soakSelector(sel, label)), withData("k", "0")}
		switch name {
		case "alpha": // consumed, and pulled from (kubernetes-replicator's annotations)
			opts = append(opts, withAnnotation(keyReload, "true"),
				withAnnotation("replicator.v1.mittwald.de/replication-allowed", "true"),
				withAnnotation("replicator.v1.mittwald.de/replication-allowed-namespaces", "soak-.*"))
		case "beta": // a second key, and a label to copy
			opts = append(opts, withData("k2", "second-"+k.id), withLabel("tier", "gold"))
		case "gamma":
			opts = append(opts, withLabel("courier.dev/protect", "true"))
		}
		createSecret(t, k.src, name, opts...)
	}
	k.firstID = identityWith(t, "courier-soak", reloadResourcesRBAC(t, "rollouts.argoproj.io"))
	k.rollouts, k.rolls = ensureRolloutCRD(t), map[string]int{}
	k.secondID = identityWith(t, "courier-soak-second", nil)
	k.lag = laggingServer(t)
	k.src2 = newNamespace(t, "soak-src2", nil)
	k.refs["src"], k.refs["src2"] = k.src, k.src2
	createSecret(t, k.src2, "delta", withAnnotation(keyReplicateTo, soakSelector(deltaSelector, label)), withAnnotation(keyReload, "true"), withData("k", "0"))
	// The namespaces made before courier starts: the trace's (at 0), else four.
	if ops == nil {
		for range 4 {
			k.apply(k.newNamespaceOp())
		}
	}
	for _, o := range ops {
		if o.At == 0 {
			k.apply(o)
		}
	}
	if len(k.live) < 2 {
		t.Fatalf("the soak needs two namespaces made before courier starts (n0 and n1, at 0 in a trace), has %d", len(k.live))
	}
	// Bystanders: objects courier does not own, one of them named like a source.
	for i, ns := range k.live[:2] {
		for _, name := range []string{"bystander", []string{"gamma", "beta"}[i]} {
			b := createSecret(t, ns, name, withData("mine", "keep"))
			k.bystanders[ns+"/"+name] = b.ResourceVersion
		}
	}
	k.start()
	k.startSecond()

	k.began = time.Now()
	if ops == nil {
		for deadline := time.Now().Add(d); time.Now().Before(deadline); {
			if o, ok := k.choose(); ok {
				k.apply(o)
			}
			time.Sleep(time.Duration(k.rng.IntN(150)) * time.Millisecond)
		}
	} else {
		k.replay(slices.DeleteFunc(slices.Clone(ops), func(o trace.Op) bool { return o.At == 0 }))
	}
	k.lag.Release()
	t.Logf("operations: %v; courier killed %d times", k.ops, k.kills)
	if len(k.outages) > 0 {
		controllersRecovered(t)
	}

	// Converge with the last courier, then check.
	if k.courier.Exited() {
		k.start()
	}
	if k.second.Exited() {
		k.startSecond()
	}
	vs := k.lastChangeRollsEveryConsumerOut()
	start := time.Now()
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, soakSettle, true, func(ctx context.Context) (bool, error) {
		ok, _ := k.converged(ctx)
		return ok, nil
	}); err != nil {
		vs = append(vs, oracle.Violation{Rule: fmt.Sprintf("the namespaces did not hold exactly their replicas, equal to their sources, within %s", soakSettle), Request: "all"})
	} else {
		t.Logf("every namespace holds exactly its replicas, equal to their sources: %s", time.Since(start).Round(time.Millisecond))
	}
	settledAt := time.Now()
	for ref, rv := range k.bystanders {
		ns, name, _ := strings.Cut(ref, "/")
		got, err := getSecret(t.Context(), ns, name)
		if err != nil || got.ResourceVersion != rv {
			vs = append(vs, oracle.Violation{Rule: fmt.Sprintf("object %s courier does not own was changed or removed (%v)", ref, err), Request: "all"})
		}
	}
	// As long as a crash point's: a pending rollout or guard retry would show.
	time.Sleep(crashQuiet)
	for ns, before := range k.apps {
		n, err := replicaSets(t.Context(), ns, "app")
		if err != nil {
			t.Fatal(err)
		}
		if rollouts, explained := n-1, k.changes[ns]-before; rollouts > explained {
			vs = append(vs, oracle.Violation{Rule: fmt.Sprintf("%s/app rolled out %d times, but its input changed only %d times", ns, rollouts, explained), Request: "all"})
		}
	}
	if g := k.goroutines(); g > k.startedAt+25 {
		vs = append(vs, oracle.Violation{Rule: fmt.Sprintf("courier's goroutines grew from %d when it started leading to %d", k.startedAt, g), Request: "all"})
	}
	k.courier.Stop()
	k.second.Stop()
	return append(vs, k.judge(mark, settledAt)...)
}

// soakStormWindow is both installations' --reload-storm-window: the soak
// changes its inputs faster than five times in it, so storms trip, and it
// is short enough for them to end before the last change.
const soakStormWindow = 15 * time.Second

// soakSettle is how long the couriers may take to settle after the faults
// end, as the convergence check allows.
const soakSettle = 60 * time.Second

// lastChangeWithin bounds the rollouts of the last change: the debounce,
// then one patch per consumer, paced, by two installations on two cores.
const lastChangeWithin = 3 * converge

// lastChangeRollsEveryConsumerOut is the lower bound on rollouts (the
// upper one, no rollout without a change, is checked after it): a courier
// that never rolled out would pass that. Once every consumer has its
// baseline and no input is held by the storm breaker (a whole window
// without a change has ended each storm), the soak edits both consumed
// sources once more, and every consumer, Deployment or Rollout, must roll
// out for it.
func (k *soak) lastChangeRollsEveryConsumerOut() []oracle.Violation {
	t := k.t
	// After the faults (a kube-apiserver restarted at the end, say) the
	// couriers may take as long as the convergence check allows.
	baselined := func(ctx context.Context) (bool, error) {
		for ns := range k.apps {
			d, err := admin().AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
			if err != nil || d.Annotations[keyInputs] == "" {
				return false, nil
			}
		}
		for ns := range k.rolls {
			u, err := getCustom(ctx, t, k.rollouts, ns, "roll")
			if err != nil || u.GetAnnotations()[keyInputs] == "" {
				return false, nil
			}
		}
		return true, nil
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, soakSettle, true, baselined); err != nil {
		return []oracle.Violation{{Rule: fmt.Sprintf("not every consumer had its baseline within %s of the end of the faults", soakSettle), Request: "all"}}
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, soakStormWindow+soakSettle, true, func(ctx context.Context) (bool, error) {
		return metricSum(k.courier.Metrics(ctx), "courier_reloader_suppressed_inputs") == 0 &&
			metricSum(k.second.Metrics(ctx), "courier_reloader_suppressed_inputs") == 0, nil
	}); err != nil {
		return []oracle.Violation{{Rule: fmt.Sprintf("an input was still held by the storm breaker %s after the last change", soakStormWindow+soakSettle), Request: "all"}}
	}
	// No storm now is not enough: an input changed five times in the last
	// window would trip the breaker with the last change (SPEC: more than
	// --reload-storm-changes within the window). Once no operation was made
	// for a whole window, every input is quiet and the last change is the
	// first the breaker counts.
	time.Sleep(time.Until(k.lastOp.Add(soakStormWindow)))
	// A rollout is a new courier.dev/config-hash in the pod template
	// (counting ReplicaSets would not do: a Deployment keeps only its last
	// ten).
	templateHash := func(ctx context.Context, consumer string) (string, error) {
		ns, kind, _ := strings.Cut(consumer, "/")
		if kind == "app" {
			d, err := admin().AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return d.Spec.Template.Annotations[keyConfigHash], nil
		}
		u, err := getCustom(ctx, t, k.rollouts, ns, "roll")
		if err != nil {
			return "", err
		}
		h, _, err := unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", keyConfigHash)
		return h, err
	}
	hashes := map[string]string{}
	for ns := range k.apps {
		hashes[ns+"/app"] = ""
	}
	for ns := range k.rolls {
		hashes[ns+"/roll"] = ""
	}
	for c := range hashes {
		h, err := templateHash(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		hashes[c] = h
	}
	k.apply(trace.Op{What: "edit source alpha", NS: "src"})
	k.apply(trace.Op{What: "edit source delta", NS: "src2"})
	total := len(hashes)
	// A consumer seen rolled out stays so: a round of reads cut short by the
	// deadline must not count those it could not read as not rolled out
	// (it once reported 0 of 27 that way, when 23 had rolled out).
	_ = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, lastChangeWithin, true, func(ctx context.Context) (bool, error) {
		for c, before := range hashes {
			if h, err := templateHash(ctx, c); err == nil && h != before {
				delete(hashes, c)
			}
		}
		return len(hashes) == 0, nil
	})
	left := slices.Sorted(maps.Keys(hashes))
	t.Logf("the last change of alpha and delta rolled out %d of %d consumers", total-len(left), total)
	var vs []oracle.Violation
	for _, w := range left {
		vs = append(vs, oracle.Violation{Rule: fmt.Sprintf("%s did not roll out within %s for the last change of its input, made after its baseline", w, lastChangeWithin), Request: "all"})
	}
	return vs
}

// replay applies ops in order, as far apart as they were made, but never
// more than two seconds (a fault's own time counts: the next operation
// waits for it).
func (k *soak) replay(ops []trace.Op) {
	var prev time.Duration
	last := time.Now()
	for _, o := range ops {
		time.Sleep(time.Until(last.Add(min(o.At-prev, 2*time.Second))))
		prev, last = o.At, time.Now()
		k.apply(o)
	}
}

// writeTrace writes ops to .run/soak/<id><suffix>.trace and returns its path.
func (k *soak) writeTrace(suffix string, ops []trace.Op) string {
	dir := filepath.Join(env.root, ".run", "soak")
	path := filepath.Join(dir, k.id+suffix+".trace")
	header := fmt.Sprintf("# courier soak %s: %d operations; replay with make soak TRACE=%s\n", k.id+suffix, len(ops), path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		k.t.Logf("the trace: %v", err)
		return "(not written)"
	}
	if err := os.WriteFile(path, []byte(header+trace.Format(ops)), 0o644); err != nil {
		k.t.Logf("the trace: %v", err)
		return "(not written)"
	}
	return path
}

// shorten is the trace cut to what can have led to the first of vs (the
// earliest with a time; all of them when none has one): the operations on
// the namespaces it names, and the faults and source edits of the two
// minutes before it. One violation replayed is enough to study it.
func (k *soak) shorten(vs []oracle.Violation) []trace.Op {
	pick, until := vs, time.Duration(0)
	var first time.Time
	for _, v := range vs {
		if !v.At.IsZero() && (first.IsZero() || v.At.Before(first)) {
			// Before the operations began (courier's first writes): 1 ns
			// keeps only the namespaces made before courier started.
			pick, until, first = []oracle.Violation{v}, max(v.At.Sub(k.began), time.Nanosecond), v.At
		}
	}
	named := map[string]bool{}
	for _, v := range pick {
		for ref, ns := range k.refs {
			if strings.Contains(v.Rule+" "+v.Request, ns) {
				named[ref] = true
			}
		}
	}
	return trace.Shorten(k.trace, named, until, 2*time.Minute)
}

// shortenAndReplay prints the shortened trace and replays it with the same
// courier, reporting whether the replay finds violations again.
func (k *soak) shortenAndReplay(vs []oracle.Violation) {
	short := k.shorten(vs)
	path := k.writeTrace("-short", short)
	k.t.Logf("the trace shortened to what the first violation names (%d of %d operations), replay with make soak TRACE=%s:\n%s",
		len(short), len(k.trace), path, trace.Format(short))
	k.t.Run("replay of the shortened trace", func(t *testing.T) {
		again := newSoak(t, k.bin, 0).run(0, short)
		t.Logf("the shortened trace %s gave %d violations again (the first run: %d)", path, len(again), len(vs))
		for _, v := range again {
			t.Logf("replay: violation: %s", v)
		}
	})
}

// judge has the audit-log oracle judge every write each installation made
// since mark, each as its own identity and installation (so either touching
// the other's objects is a violation), and that neither wrote anything once
// the cluster had settled.
func (k *soak) judge(mark int64, settledAt time.Time) []oracle.Violation {
	events := auditSince(k.t, mark)
	namespaces := map[string]bool{k.src: true, k.namespace: true, k.src2: true, k.secondNS: true}
	for _, ns := range k.every {
		namespaces[ns] = true
	}
	var vs []oracle.Violation
	// Every value the soak wrote (sources' edits, replicas' tampering)
	// must reach no Event. The oracle looks for each anywhere in an
	// Event's request, so only the soak's own values, which are long
	// enough to appear there by no accident, are given (another test's
	// short "edited" is a word a message may use).
	values := append(slices.Clone(k.values), "tampered")
	for _, scope := range []oracle.Scope{
		// Protected sources (the first installation's) are judged once.
		{Courier: k.firstID.user(), Installation: k.namespace, Namespaces: namespaces, ProtectedGap: 40 * time.Second, Outages: k.outages, Values: values},
		{Courier: k.secondID.user(), Installation: k.secondNS, Namespaces: namespaces, Values: values},
	} {
		checked, unjudged := oracle.CheckAll(events, scope, time.Now())
		vs = append(vs, checked...)
		vs = append(vs, writesOnceSettled(events, scope, settledAt)...)
		k.t.Logf("the oracle judged the writes of installation %s: %d, and could not judge %d (to objects a write of unknown outcome had touched: kube-apiserver or etcd killed under it)",
			scope.Installation, len(oracle.Writes(events, scope.Courier, time.Time{}, namespaces))-len(unjudged), len(unjudged))
	}
	rollouts := oracle.Rollouts(events, k.firstID.user(), namespaces)
	n := 0
	for w, r := range rollouts {
		if strings.HasPrefix(w, "rollouts ") {
			n += r
		}
	}
	k.t.Logf("%d Argo Rollouts consumers made %d rollouts", len(k.rolls), n)
	for ns, before := range k.rolls {
		if n, explained := rollouts["rollouts "+ns+"/roll"], k.changes[ns]-before; n > explained {
			vs = append(vs, oracle.Violation{Rule: fmt.Sprintf("Rollout %s/roll rolled out %d times, but its input changed only %d times", ns, n, explained), Request: "all"})
		}
	}
	return vs
}

// controllersRecovered waits until the controller manager, whose watches
// kube-apiserver's and etcd's restarts broke, acts again (a probe
// Deployment gets its ReplicaSet), so the tests after this one find the
// cluster as they expect.
func controllersRecovered(t *testing.T) {
	t.Helper()
	ns := newNamespace(t, "probe", nil)
	createDeployment(t, ns, "probe", nil, podSpec(nil, nil, nil))
	eventually(t, 2*time.Minute, "the controller manager making a probe Deployment's ReplicaSet", func(ctx context.Context) (bool, error) {
		n, err := replicaSets(ctx, ns, "probe")
		return n > 0, err
	})
}

func (k *soak) start() {
	if k.namespace == "" { // one installation across restarts
		k.namespace = newNamespace(k.t, "courier", nil)
	}
	if k.proxy == nil {
		k.proxy = newFaultProxy(k.t)
	}
	// A short Lease: a restart after a SIGKILL waits out the dead one's.
	k.courier = startCourierFrom(k.t, k.bin, k.firstID, nil, "--namespace="+k.namespace, "--source-namespaces="+k.src, "--reload-debounce=300ms", "--reload-storm-window="+soakStormWindow.String(),
		"--lease-duration=6s", "--renew-deadline=2s", "--retry-period=500ms", "--compat=replicator",
		"--reload-resources=rollouts.argoproj.io", "--kubeconfig="+k.proxy.kubeconfig(k.t, k.firstID))
	k.courier.WaitLeader(k.t.Context())
	// Leading is reported before the workers start: take the baseline once
	// two samples half a second apart agree.
	k.startedAt = -1
	for range 20 {
		time.Sleep(500 * time.Millisecond)
		g := k.goroutines()
		if g == k.startedAt {
			break
		}
		k.startedAt = g
	}
}

// startSecond starts the second installation (again), through the lagging
// kube-apiserver.
func (k *soak) startSecond() {
	if k.secondNS == "" {
		k.secondNS = newNamespace(k.t, "courier-second", nil)
	}
	k.second = startCourierFrom(k.t, k.bin, k.secondID, nil, "--namespace="+k.secondNS, "--source-namespaces="+k.src2,
		"--reload-debounce=300ms", "--reload-storm-window="+soakStormWindow.String(), "--lease-duration=6s", "--renew-deadline=2s", "--retry-period=500ms",
		"--kubeconfig="+kubeconfigAt(k.t, k.secondID, k.lag.Host))
	k.second.WaitLeader(k.t.Context())
}

func (k *soak) goroutines() int {
	return int(metricSum(k.courier.Metrics(k.t.Context()), "go_goroutines"))
}

func (k *soak) labelValue() string { return []string{"a", "b", "c"}[k.rng.IntN(3)] }

// newNamespaceOp is the creation of the soak's next namespace.
func (k *soak) newNamespaceOp() trace.Op {
	return trace.Op{What: "create namespace", NS: fmt.Sprintf("n%d", len(k.every)), Arg: k.labelValue()}
}

// pick is one of the live namespaces, as the trace refers to it.
func (k *soak) pick() string { return k.ref(k.live[k.rng.IntN(len(k.live))]) }

// ref is how the trace refers to namespace ns.
func (k *soak) ref(ns string) string {
	for r, name := range k.refs {
		if name == ns {
			return r
		}
	}
	return ""
}

// choose is a random operation a user, a tenant or a fault makes next;
// false for none this time.
func (k *soak) choose() (trace.Op, bool) {
	o := trace.Op{}
	switch op := k.rng.IntN(100); {
	case op < 12:
		o = k.newNamespaceOp()
	case op < 27:
		o = trace.Op{What: "relabel namespace", NS: k.pick(), Arg: k.labelValue()}
	case op < 32 && len(k.live) > 3:
		o = trace.Op{What: "delete namespace", NS: k.pick()}
	case op < 52:
		name := []string{"alpha", "beta", "gamma", "delta"}[k.rng.IntN(4)]
		o = trace.Op{What: "edit source " + name, NS: "src"}
		if name == "delta" {
			o.NS = "src2"
		}
	case op < 65:
		o = trace.Op{What: "edit replica", NS: k.pick()}
	case op < 72:
		o = trace.Op{What: "delete replica beta", NS: k.pick()}
	case op < 74:
		o = trace.Op{What: "create a Rollout consumer", NS: k.pick()}
	case op < 82:
		o = trace.Op{What: "create consumer", NS: k.pick()}
	case op < 84:
		// beta's keys or copied labels change: every replica follows.
		if k.rng.IntN(2) == 0 {
			o = trace.Op{What: "beta replicate-keys k", NS: "src", Arg: fmt.Sprint(!k.betaKeys)}
		} else {
			o = trace.Op{What: "beta copy-labels tier", NS: "src", Arg: fmt.Sprint(!k.betaCopy)}
		}
	case op < 86:
		o = trace.Op{What: "create a pull of alpha", NS: k.pick()}
		if k.pulls[k.refs[o.NS]] {
			o.What = "edit the pull's content"
		}
	case op < 88:
		o = trace.Op{What: "delete protected source gamma", NS: "src"}
	case op < 91:
		o = trace.Op{What: "cut courier's watches"}
	case op < 93:
		o = trace.Op{What: "stall courier's watches 3s", Arg: []string{"secrets", "namespaces"}[k.rng.IntN(2)]}
	case op < 94:
		o = trace.Op{What: "restart", Arg: []string{"kube-apiserver", "etcd"}[k.rng.IntN(2)]}
	case op < 96:
		o = trace.Op{What: "hold the second installation's kube-apiserver", Arg: fmt.Sprint(time.Duration(1+k.rng.IntN(4)) * time.Second)}
	default:
		switch k.rng.IntN(6) {
		case 0:
			o = trace.Op{What: "kill courier"}
		case 1:
			o = trace.Op{What: "kill the second installation"}
		}
	}
	return o, o.What != ""
}

// apply makes operation o, unless the soak's rules forbid it now — it never
// touches a bystander, deletes a namespace it made before courier started,
// edits one replica (or the pulls) more than 4 times a minute, or makes a
// second consumer or pull in a namespace — and records it in the trace.
func (k *soak) apply(o trace.Op) {
	t, ctx := k.t, k.t.Context()
	ns := k.refs[o.NS]
	if o.NS != "" && ns == "" && o.What != "create namespace" || ns != "" && o.NS[0] == 'n' && !slices.Contains(k.live, ns) {
		return // a namespace a replayed trace has not made, or has deleted
	}
	switch o.What {
	case "create namespace":
		name := newNamespace(t, "soak", map[string]string{"soak-" + k.id: o.Arg})
		k.refs[o.NS] = name
		k.live = append(k.live, name)
		k.every = append(k.every, name)
		k.labels[name] = o.Arg
		k.did(o)
	case "relabel namespace":
		k.did(o)
		setNamespaceLabels(t, ns, func(l map[string]string) { l["soak-"+k.id] = o.Arg })
		if consumed(k.labels[ns]) != consumed(o.Arg) { // alpha's replica goes and delta's comes, or back
			k.changed(ns, 2)
		}
		k.labels[ns] = o.Arg
	case "delete namespace":
		i := slices.Index(k.live, ns)
		if k.holdsBystander(ns) {
			return
		}
		k.did(o)
		_ = admin().CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		delete(k.apps, ns)
		delete(k.rolls, ns)
		delete(k.pulls, ns)
		k.live = slices.Delete(k.live, i, i+1)
	case "edit source alpha", "edit source beta", "edit source gamma", "edit source delta":
		name := strings.TrimPrefix(o.What, "edit source ")
		k.did(o)
		v := fmt.Sprint(time.Now().UnixNano())
		updateOnConflict(t, o.What, func(ctx context.Context) error {
			s, err := getSecret(ctx, ns, name)
			if apierrors.IsNotFound(err) {
				return nil // the protected gamma, deleted and not restored yet
			}
			if err != nil {
				return err
			}
			s.Data["k"] = []byte(v)
			recordValues(s.Data)
			k.values = append(k.values, v)
			_, err = admin().CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
			return err
		})
		for n, v := range k.labels {
			if consumed(v) == name {
				k.changed(n, 1)
			}
		}
	case "edit replica":
		// At most 4 edits of one replica a minute: past 5 courier backs off
		// (ReplicaContested) by design, and the end state would not converge.
		recent := slices.DeleteFunc(k.edits[ns], func(at time.Time) bool { return time.Since(at) > 70*time.Second })
		if len(recent) >= 4 {
			return
		}
		name := consumed(k.labels[ns]) // kept by the first installation or the second
		o.Arg = name
		k.did(o)
		if ok, _ := editSecret(ns, name, "k", "tampered")(ctx); ok {
			k.edits[ns] = append(recent, time.Now())
			k.changed(ns, 2) // the edit, and courier's revert
		}
	case "delete replica beta":
		if _, owned := k.bystanders[ns+"/beta"]; owned {
			return
		}
		k.did(o)
		_ = admin().CoreV1().Secrets(ns).Delete(ctx, "beta", metav1.DeleteOptions{})
	case "create a Rollout consumer":
		if _, ok := k.rolls[ns]; ok {
			return
		}
		k.did(o)
		k.rolls[ns] = k.changesBefore(ns)
		tmpl := map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "roll"}},
			"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.example/app:1",
				"env": []any{keyRefEnv("alpha"), keyRefEnv("delta")}}}}}
		createObject(t, k.rollouts, "Rollout", ns, "roll", map[string]string{keyReload: "true"},
			map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "roll"}}, "template": tmpl})
	case "create consumer":
		if _, ok := k.apps[ns]; ok {
			return
		}
		k.did(o)
		k.apps[ns] = k.changesBefore(ns)
		createDeployment(t, ns, "app", nil, podSpec([]corev1.EnvVar{keyRef("secret", "alpha", "k"), keyRef("secret", "delta", "k")}, nil, nil))
	case "beta replicate-keys k", "beta copy-labels tier":
		k.did(o)
		if o.What == "beta replicate-keys k" {
			k.betaKeys = o.Arg == "true"
		} else {
			k.betaCopy = o.Arg == "true"
		}
		keys, copied := k.betaKeys, k.betaCopy
		updateOnConflict(t, "beta's annotations", func(ctx context.Context) error {
			s, err := getSecret(ctx, k.src, "beta")
			if err != nil {
				return err
			}
			delete(s.Annotations, "courier.dev/replicate-keys")
			delete(s.Annotations, "courier.dev/copy-labels")
			if keys {
				s.Annotations["courier.dev/replicate-keys"] = "k"
			}
			if copied {
				s.Annotations["courier.dev/copy-labels"] = "tier"
			}
			_, err = admin().CoreV1().Secrets(k.src).Update(ctx, s, metav1.UpdateOptions{})
			return err
		})
	case "create a pull of alpha":
		if k.pulls[ns] || k.holdsBystander(ns) {
			return
		}
		k.did(o)
		k.pulls[ns] = true
		createSecret(t, ns, "puller", withAnnotation("replicator.v1.mittwald.de/replicate-from", k.src+"/alpha"), withLabel("owner", "tenant"))
	case "edit the pull's content":
		// At most 4 edits a minute, as for replicas.
		recent := slices.DeleteFunc(k.pullEdits, func(at time.Time) bool { return time.Since(at) > 70*time.Second })
		if !k.pulls[ns] || len(recent) >= 4 {
			return
		}
		k.did(o)
		if ok, _ := editSecret(ns, "puller", "k", "tampered")(ctx); ok {
			k.pullEdits = append(recent, time.Now())
		}
	case "delete protected source gamma":
		k.did(o)
		_ = admin().CoreV1().Secrets(k.src).Delete(ctx, "gamma", metav1.DeleteOptions{})
	case "cut courier's watches":
		k.did(o)
		chaos.perturbations.Add(1)
		k.proxy.cutWatches()
	case "stall courier's watches 3s":
		k.did(o)
		chaos.perturbations.Add(1)
		k.proxy.stall(o.Arg, 3*time.Second)
	case "restart":
		k.did(o)
		chaos.perturbations.Add(1)
		// kube-apiserver gets SIGTERM (and SIGKILL when it has not
		// stopped 10 s later, as it usually has not: writes in flight then
		// have an outcome the audit log cannot tell, which the oracle
		// allows for); etcd is killed.
		from := time.Now()
		if err := env.cluster.Restart(ctx, o.Arg, o.Arg == "etcd"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, o.Arg+" serving again", func(ctx context.Context) (bool, error) {
			_, err := admin().CoreV1().Namespaces().Get(ctx, k.src, metav1.GetOptions{})
			return err == nil, nil
		})
		k.outages = append(k.outages, oracle.Span{From: from, To: time.Now()})
	case "hold the second installation's kube-apiserver":
		// The second installation's kube-apiserver lags: what it watches,
		// writes and renews waits while the other operations go on; its
		// leader loses the Lease, and its writes in flight land late.
		d, err := time.ParseDuration(o.Arg)
		if err != nil || time.Now().Before(k.heldUntil) {
			return
		}
		k.did(o)
		chaos.perturbations.Add(1)
		k.lag.Hold()
		k.heldUntil = time.Now().Add(d)
		time.AfterFunc(d, k.lag.Release)
	case "kill courier":
		k.kill(o, k.courier, k.start)
	case "kill the second installation":
		k.kill(o, k.second, k.startSecond)
	default:
		t.Fatalf("the soak has no operation %q", o.What)
	}
}

// kill SIGKILLs p and starts its installation again.
func (k *soak) kill(o trace.Op, p *courierProcess, start func()) {
	k.did(o)
	chaos.perturbations.Add(1)
	p.Signal(syscall.SIGKILL)
	p.Wait(5 * time.Second)
	k.kills++
	start()
}

// keyRefEnv is an env entry reading key k of Secret name, unstructured,
// optional: a Rollout opts in itself, so both its inputs are opted in, and
// a namespace holds only one of alpha and delta; a required reference to
// the other would hold every rollout back (InputMissing: pods rolled out
// could not start).
func keyRefEnv(name string) map[string]any {
	return map[string]any{"name": strings.ToUpper(name), "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": name, "key": "k", "optional": true}}}
}

func (k *soak) holdsBystander(ns string) bool {
	for ref := range k.bystanders {
		if strings.HasPrefix(ref, ns+"/") {
			return true
		}
	}
	return false
}

// converged reports whether every live namespace holds a replica of each
// source whose selector matches it, equal to the source, and no other
// replica (bystanders are not replicas: courier never writes them).
func (k *soak) converged(ctx context.Context) (bool, error) {
	label := "soak-" + k.id
	for name, sel := range soakSources {
		src, err := getSecret(ctx, k.src, name)
		if apierrors.IsNotFound(err) {
			return false, nil // the protected gamma, not restored yet
		}
		if err != nil {
			return false, err
		}
		selector, err := labels.Parse(soakSelector(sel, label))
		if err != nil {
			return false, err
		}
		for _, ns := range k.live {
			n, err := admin().CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			got, err := getSecret(ctx, ns, name)
			if apierrors.IsNotFound(err) {
				got = nil
			} else if err != nil {
				return false, err
			}
			isReplica := got != nil && got.Annotations["courier.dev/source"] == k.src+"/"+name
			bystander := got != nil && !isReplica
			switch {
			case bystander:
				// a squatter: courier must leave it, checked by resourceVersion
			case selector.Matches(labels.Set(n.Labels)):
				want := src.Data
				if name == "beta" && k.betaKeys {
					want = map[string][]byte{"k": src.Data["k"]}
				}
				if !isReplica || !equalData(got.Data, want) {
					return false, nil
				}
				if name == "beta" && (got.Labels["tier"] == "gold") != k.betaCopy {
					return false, nil
				}
			case got != nil:
				return false, nil // a replica where none is targeted
			}
		}
	}
	delta, err := getSecret(ctx, k.src2, "delta")
	if err != nil {
		return false, err
	}
	for _, ns := range k.live { // the second installation's replicas
		got, err := getSecret(ctx, ns, "delta")
		switch {
		case apierrors.IsNotFound(err):
			got = nil
		case err != nil:
			return false, err
		}
		want := consumed(k.labels[ns]) == "delta"
		if want != (got != nil) || want && (got.Annotations[keyInstallation] != k.secondNS || !equalData(got.Data, delta.Data)) {
			return false, nil
		}
	}
	alpha, err := getSecret(ctx, k.src, "alpha")
	if err != nil {
		return false, err
	}
	for ns := range k.pulls {
		got, err := getSecret(ctx, ns, "puller")
		if err != nil {
			return false, err
		}
		if !equalData(got.Data, alpha.Data) || got.Labels["owner"] != "tenant" {
			return false, nil
		}
	}
	return true, nil
}
