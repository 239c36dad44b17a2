package reloader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/inputs"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// fixture is a reloader on a fake clientset whose informer indexers are
// filled directly.
type fixture struct {
	client   *fake.Clientset
	inf      *informers.Set
	c        *Controller
	recorder *record.FakeRecorder
}

// fixtureNow is the time on a fixture's clock.
var fixtureNow = time.Date(2026, 11, 23, 7, 0, 0, 0, time.UTC)

func newFixture(t *testing.T, opts Options, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	inf, err := informers.New(client, nil, role.Config{Namespace: "courier"}, informers.Scope{}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(100)
	opts.QPS, opts.Burst, opts.Namespace = 100, 100, "courier"
	opts.Clock = testingclock.NewFakeClock(fixtureNow)
	c, err := New(client, inf.Workloads(), inf.Secrets.Informer(), inf.ConfigMaps.Informer(), rec, prometheus.NewRegistry(), zap.NewNop(), opts)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{client: client, inf: inf, c: c, recorder: rec}
	for _, o := range objs {
		f.put(t, o)
	}
	key := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "courier", Name: KeySecret,
		Labels: map[string]string{wellknown.DigestKey: "true"}}, Data: map[string][]byte{"key": make([]byte, 32)}}
	if err := inf.Secrets.Informer().GetIndexer().Add(key); err != nil {
		t.Fatal(err)
	}
	return f
}

// consumedAll is the fixture's informers.Consumed: every Secret and
// ConfigMap is held as its digests, as if a workload consumed it when the
// cache saw it (TestAnInputHeldAsMetadataOnlyIsReadOnce tries the rest).
func consumedAll(string, string, string) bool { return true }

// put stores o in the cache as the informers would (transformed).
func (f *fixture) put(t *testing.T, o runtime.Object) {
	t.Helper()
	x, _ := informers.Transform(informers.SourcesIn(role.Config{Namespace: "courier"}), consumedAll)(o.DeepCopyObject())
	var err error
	switch x := x.(type) {
	case *corev1.Secret:
		err = f.inf.Secrets.Informer().GetIndexer().Update(x)
	case *corev1.ConfigMap:
		err = f.inf.ConfigMaps.Informer().GetIndexer().Update(x)
	case *content.Digested:
		if x.GetObjectKind().GroupVersionKind().Kind == wellknown.KindSecret {
			err = f.inf.Secrets.Informer().GetIndexer().Update(x)
		} else {
			err = f.inf.ConfigMaps.Informer().GetIndexer().Update(x)
		}
	case *workload.Object:
		err = f.inf.Workloads()[x.KindName()].GetIndexer().Update(x)
	default:
		t.Fatalf("the fixture cannot hold a %T", x)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// sync syncs the deployment app/web and returns the patches it sent.
func (f *fixture) sync(t *testing.T) []map[string]string {
	t.Helper()
	f.client.ClearActions()
	if err := f.c.sync(t.Context(), key{Kind: workload.Deployment, Namespace: "app", Name: "web"}); err != nil {
		t.Fatalf("sync: %v", err)
	}
	var out []map[string]string
	for _, a := range f.client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			out = append(out, summarize(t, p.GetPatch()))
		}
	}
	return out
}

// summarize reduces a reloader patch to what it changes: the workload's
// courier annotations and whether it rolls the pod template out.
func summarize(t *testing.T, data []byte) map[string]string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := json.Unmarshal(data, d); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range d.Annotations {
		if k != wellknown.ReloadedAt {
			out[k] = v
		}
	}
	if h := d.Spec.Template.Annotations[wellknown.ConfigHash]; h != "" {
		out["rollout"] = "yes"
	}
	return out
}

func secret(name, value string, annotations map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, Annotations: annotations},
		Data: map[string][]byte{"k": []byte(value)}}
}

func deployment(annotations map[string]string, optional bool, secrets ...string) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", ResourceVersion: "3", Annotations: annotations}}
	for _, s := range secrets {
		d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: s,
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: s, Optional: &optional}}})
	}
	return d
}

// baselined runs the first sync of d and stores d as it leaves it, which
// it returns.
func (f *fixture) baselined(t *testing.T, d *appsv1.Deployment) *appsv1.Deployment {
	t.Helper()
	patches := f.sync(t)
	if len(patches) != 1 || patches[0]["rollout"] != "" {
		t.Fatalf("first sight wrote %v, want one baseline patch without a rollout", patches)
	}
	d = d.DeepCopy()
	metav1.SetMetaDataAnnotation(&d.ObjectMeta, wellknown.ConfigInputs, patches[0][wellknown.ConfigInputs])
	f.put(t, d)
	return d
}

func TestSyncOptInBaselineAndRollout(t *testing.T) {
	tests := []struct {
		name   string
		opts   Options
		deploy *appsv1.Deployment
		input  map[string]string // annotations of the consumed Secret
		rolls  bool
	}{
		{"workload reload=true", Options{}, deployment(map[string]string{wellknown.Reload: "true"}, false, "db"), nil, true},
		{"workload reload-on names it", Options{}, deployment(map[string]string{wellknown.ReloadOn: "secret/db"}, false, "db"), nil, true},
		{"input reload=true", Options{}, deployment(nil, false, "db"), map[string]string{wellknown.Reload: "true"}, true},
		{"--reload-all", Options{ReloadAll: true}, deployment(nil, false, "db"), nil, true},
		{"no opt-in", Options{}, deployment(nil, false, "db"), nil, false},
		{"reload=false wins over --reload-all", Options{ReloadAll: true}, deployment(map[string]string{wellknown.Reload: "false"}, false, "db"), nil, false},
	}
	// reload-on naming an object the template does not reference makes it an
	// input (read whole): its baseline is written; the template's db, not
	// named, rolls nothing out.
	t.Run("reload-on names another input", func(t *testing.T) {
		d := deployment(map[string]string{wellknown.ReloadOn: "secret/other"}, false, "db")
		f := newFixture(t, Options{}, secret("db", "v1", nil), secret("other", "o1", nil), d)
		f.baselined(t, d)
		f.put(t, secret("db", "v2", nil))
		if got := f.sync(t); len(got) != 0 {
			t.Fatalf("db, not named, gave %v", got)
		}
		f.put(t, secret("other", "o2", nil))
		if got := f.sync(t); len(got) != 1 || got[0]["rollout"] != "yes" || got[0][wellknown.ReloadedFor] != "secret/other" {
			t.Fatalf("other, named: %v, want one rollout for secret/other", got)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.opts, secret("db", "v1", tt.input), tt.deploy)
			if !tt.rolls {
				f.put(t, secret("db", "v2", tt.input))
				if got := f.sync(t); len(got) != 0 {
					t.Fatalf("a workload that did not opt in was patched: %v", got)
				}
				return
			}
			f.baselined(t, tt.deploy)
			if got := f.sync(t); len(got) != 0 {
				t.Fatalf("a second sync with nothing changed wrote %v", got)
			}
			f.put(t, secret("db", "v2", tt.input))
			got := f.sync(t)
			if len(got) != 1 {
				t.Fatalf("after the change: %d patches, want 1 rollout", len(got))
			}
			if diff := cmp.Diff("yes", got[0]["rollout"]); diff != "" {
				t.Errorf("rollout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff("secret/db", got[0][wellknown.ReloadedFor]); diff != "" {
				t.Errorf("reloaded-for (-want +got):\n%s", diff)
			}
			if e := <-f.recorder.Events; !strings.Contains(e, wellknown.ReasonReloaded) {
				t.Errorf("event %q, want %s", e, wellknown.ReasonReloaded)
			}
		})
	}
}

func TestSyncDeletedInputIsInputMissingAndWritesNothing(t *testing.T) {
	for _, optional := range []bool{false, true} {
		d := deployment(map[string]string{wellknown.Reload: "true"}, optional, "db")
		f := newFixture(t, Options{}, secret("db", "v1", nil), d)
		f.baselined(t, d)
		if err := f.inf.Secrets.Informer().GetIndexer().Delete(secret("db", "", nil)); err != nil {
			t.Fatal(err)
		}
		if got := f.sync(t); len(got) != 0 {
			t.Errorf("optional=%v: deletion wrote %v, want nothing", optional, got)
		}
		select {
		case e := <-f.recorder.Events:
			if optional || !strings.Contains(e, wellknown.ReasonInputMissing) || !strings.Contains(e, "secret/db") {
				t.Errorf("optional=%v: event %q", optional, e)
			}
		default:
			if !optional {
				t.Errorf("no %s event", wellknown.ReasonInputMissing)
			}
		}
	}
}

// An input read from the cache that is gone from it before its digests
// are taken is observed as it was read (the cache is not read again: a
// nil input there crashed courier in make test's soak).
func TestAnInputGoneFromTheCacheMidObserveIsObservedAsRead(t *testing.T) {
	f := newFixture(t, Options{})
	read := secret("db", "v1", nil) // read, then deleted: not in the cache
	o := observed{now: baseline{}, optional: map[string]bool{}, missingKeys: map[string][]string{}, previous: baseline{}, legacy: baseline{}, hidden: map[string]bool{}}
	ref := inputs.Ref{Kind: wellknown.KindSecret, Name: "db"}
	f.c.observeInput(t.Context(), &o, key{Kind: workload.Deployment, Namespace: "app", Name: "web"}, "w", ref, read, nil, nil)
	if o.now[ref.ID()] == "" {
		t.Errorf("observed %+v, want the digest of what was read", o.now)
	}
}

// A source's values are digested once per resourceVersion, not once per
// consumer sync (#13 item 17).
func TestASourcesDigestsAreComputedOncePerChange(t *testing.T) {
	f := newFixture(t, Options{})
	src := secret("db", "v1", nil)
	src.UID, src.ResourceVersion = "u", "1"
	// Stored as a source is: values kept.
	if err := f.inf.Secrets.Informer().GetIndexer().Add(src); err != nil {
		t.Fatal(err)
	}
	lookup := func() []content.Entry {
		t.Helper()
		in, err := f.c.inputOf(t.Context(), wellknown.KindSecret, f.c.object(wellknown.KindSecret, "app", "db"))
		if err != nil {
			t.Fatal(err)
		}
		return in.entries
	}
	first := lookup()
	second := lookup()
	if &first[0] != &second[0] {
		t.Error("the source's digests were computed again for a second consumer")
	}
	changed := src.DeepCopy()
	changed.ResourceVersion, changed.Data["k"] = "2", []byte("v2")
	if err := f.inf.Secrets.Informer().GetIndexer().Update(changed); err != nil {
		t.Fatal(err)
	}
	if third := lookup(); third[0].Digest == first[0].Digest {
		t.Error("a changed source kept its old digests")
	}
}

// A baseline written before digests were keyed is compared as written, then
// rewritten keyed: an upgrade rolls out only real changes (#13 item 16).
func TestUnkeyedBaselinesAreMigratedWithoutARollout(t *testing.T) {
	for _, changed := range []bool{false, true} {
		d := deployment(map[string]string{wellknown.Reload: "true"}, false, "db")
		ref := inputs.Ref{Kind: wellknown.KindSecret, Name: "db"}
		legacy := (digester{}).consumedDigest(ref, content.Entries(secret("db", "v1", nil)))
		d.Annotations[wellknown.ConfigInputs] = "secret/db=" + legacy
		value := "v1"
		if changed {
			value = "v2"
		}
		f := newFixture(t, Options{}, secret("db", value, nil), d)
		got := f.sync(t)
		if len(got) != 1 {
			t.Fatalf("changed=%v: %d patches, want 1", changed, len(got))
		}
		if rolled := got[0]["rollout"] == "yes"; rolled != changed {
			t.Errorf("changed=%v: rollout %v", changed, rolled)
		}
		if b := got[0][wellknown.ConfigInputs]; !strings.HasPrefix(b, keyIDField+"=") || strings.Contains(b, legacy) {
			t.Errorf("changed=%v: baseline %q not rewritten keyed", changed, b)
		}
	}
}

func TestAddKindAndItsStop(t *testing.T) {
	f := newFixture(t, Options{})
	var rs workload.Resources
	if err := rs.Set("widgets.example.com"); err != nil {
		t.Fatal(err)
	}
	kind := workload.Custom{Resource: rs[0], Version: "v1", Kind: "Widget"}
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &workload.Object{}, 0, cache.Indexers{})
	stop, err := f.c.AddKind(kind, inf)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.c.kind("Widget.example.com"); !ok {
		t.Fatal("the kind is not known after AddKind")
	}
	if _, err := f.c.AddKind(kind, inf); err == nil {
		t.Error("the same kind added twice")
	}
	stop()
	if _, ok := f.c.kind("Widget.example.com"); ok {
		t.Error("the kind is still known after its stop")
	}
	if _, ok := f.c.kind(workload.Deployment); !ok {
		t.Error("a built-in kind went with it")
	}
}

// A Deployment waits while Rollouts are not known in full: one held by a
// Rollout (workloadRef) must not be reloaded on its own meanwhile.
func TestDeploymentsWaitWhileRolloutsArePending(t *testing.T) {
	pending := true
	d := deployment(map[string]string{wellknown.Reload: "true"}, false, "db")
	f := newFixture(t, Options{Pending: func() bool { return pending }}, secret("db", "1", nil), d)
	f.client.ClearActions()
	err := f.c.sync(t.Context(), key{Kind: workload.Deployment, Namespace: "app", Name: "web"})
	if !errors.Is(err, errPending) || len(f.client.Actions()) != 0 {
		t.Fatalf("sync while pending = %v with %d actions; want errPending and nothing written", err, len(f.client.Actions()))
	}
	pending = false
	f.baselined(t, d)
}

// A change waits while the replicator has writes to make, for at most
// ReplicationWait; a sync with no change behind it (a term's resync) never
// waits.
func TestChangesWaitForTheReplicator(t *testing.T) {
	replicating := true
	d := deployment(map[string]string{wellknown.Reload: "true"}, false, "db")
	f := newFixture(t, Options{Replicating: func() bool { return replicating }}, secret("db", "1", nil), d)
	now := f.c.opts.Clock.Now()
	for _, tc := range []struct {
		name        string
		seen        time.Time
		replicating bool
		want        bool
	}{
		{"a change while replicating", now.Add(-time.Second), true, true},
		{"a change once replication is done", now.Add(-time.Second), false, false},
		{"a change that waited ReplicationWait", now.Add(-ReplicationWait), true, false},
		{"a resync", time.Time{}, true, false},
	} {
		replicating = tc.replicating
		if got := f.c.waitsForReplication(tc.seen); got != tc.want {
			t.Errorf("%s: waits = %t, want %t", tc.name, got, tc.want)
		}
	}
	replicating = true
	f.baselined(t, d) // a resync's sync goes ahead while replicating
}

// Workloads parked while the replicator is busy are queued again, with
// when their change was first seen, once it is idle; until then nothing is
// queued (one loop asks, not a timer per workload).
func TestParkedChangesAreReleasedWhenTheReplicatorIsIdle(t *testing.T) {
	var mu sync.Mutex
	replicating := true
	f := newFixture(t, Options{Replicating: func() bool { mu.Lock(); defer mu.Unlock(); return replicating }})
	clk := f.c.opts.Clock.(*testingclock.FakeClock)
	ctx := openQueue(t, f)
	seen := clk.Now().Add(-time.Second)
	a, b := key{Kind: workload.Deployment, Namespace: "n", Name: "a"}, key{Kind: workload.Deployment, Namespace: "n", Name: "b"}
	f.c.park(ctx, a, seen)
	f.c.park(ctx, b, seen.Add(time.Millisecond))
	f.c.park(ctx, b, seen) // parked again: the earlier time stays
	// The fake clock moves on every millisecond, so the loop sees many
	// polls whenever it waits.
	until := func(what string, done func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !done(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
			clk.Step(replicationPoll / 10)
		}
	}
	polls := 0
	until("", func() bool { polls++; return polls > 200 }) // some 20 polls
	if n := f.c.queue.Len(); n != 0 {
		t.Fatalf("%d queued while the replicator is busy", n)
	}
	mu.Lock()
	replicating = false
	mu.Unlock()
	until("the parked workloads were not queued once the replicator was idle", func() bool { return f.c.queue.Len() == 2 })
	for _, k := range []key{a, b} {
		if got, ok := f.c.queue.Take(k); !ok || !got.Equal(seen) {
			t.Errorf("%v queued with first seen %v, %t; want %v", k, got, ok, seen)
		}
	}
}

// A workload parked by the next term while the loop started by the last one
// has not yet seen its term end is queued, not forgotten with that term.
func TestAParkedChangeOutlivesTheTermThatStartedTheLoop(t *testing.T) {
	f := newFixture(t, Options{Replicating: func() bool { return true }})
	openQueue(t, f)
	seen := f.c.opts.Clock.Now()
	old, cancelOld := context.WithCancel(context.Background())
	a, b := key{Kind: workload.Deployment, Namespace: "n", Name: "a"}, key{Kind: workload.Deployment, Namespace: "n", Name: "b"}
	f.c.park(old, a, seen) // starts the loop with the old term's ctx
	f.c.park(context.Background(), b, seen)
	cancelOld()
	for deadline := time.Now().Add(10 * time.Second); f.c.queue.Len() != 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 2 parked workloads queued once the loop's term ended", f.c.queue.Len())
		}
	}
}

// openQueue runs a term with no workers until the test ends: the reloader's
// queue is open, and nothing takes from it. It returns once the queue is
// open, with the term's context.
func openQueue(t *testing.T, f *fixture) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	opened, term := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { cancel(); <-term })
	go func() {
		defer close(term)
		f.c.queue.Run(ctx, 0, key{}, func() { close(opened) }, nil, nil)
	}()
	<-opened
	return ctx
}

// change stores next in the cache and tells the reloader, as the Secret
// informer does when prev becomes next.
func (f *fixture) change(t *testing.T, prev, next *corev1.Secret) {
	t.Helper()
	transform := informers.Transform(informers.SourcesIn(role.Config{Namespace: "courier"}), consumedAll)
	p, _ := transform(prev.DeepCopyObject())
	n, _ := transform(next.DeepCopyObject())
	f.put(t, next)
	f.c.inputHandler(wellknown.KindSecret, f.inf.Secrets.Informer().GetIndexer()).OnUpdate(p, n)
}

// A change rolls out only once --reload-debounce has passed since it was
// seen, whatever syncs the workload sooner (a term's resync, a retry, an
// edit of the workload), and whether courier led when it was seen: a
// replica edited and reverted at once rolls nothing out, and the changes
// of one burst give one rollout.
func TestASyncWithinTheDebounceWaitsForIt(t *testing.T) {
	for _, leading := range []bool{true, false} {
		t.Run(map[bool]string{true: "seen while leading", false: "seen before the term began"}[leading], func(t *testing.T) {
			d := deployment(map[string]string{wellknown.Reload: "true"}, false, "db")
			v1 := secret("db", "1", nil)
			f := newFixture(t, Options{Debounce: 2 * time.Second}, v1, d)
			f.baselined(t, d)
			if leading {
				openQueue(t, f)
			}
			clk := f.c.opts.Clock.(*testingclock.FakeClock)
			edited := secret("db", "edited", nil)
			f.change(t, v1, edited)
			clk.Step(10 * time.Millisecond)
			if patches := f.sync(t); len(patches) != 0 {
				t.Fatalf("a sync 10ms after the change wrote %v; want nothing until the debounce is over", patches)
			}
			f.change(t, edited, v1) // reverted
			clk.Step(2 * time.Second)
			if patches := f.sync(t); len(patches) != 0 {
				t.Fatalf("the sync after the debounce wrote %v for content set back; want nothing", patches)
			}
			v2 := secret("db", "2", nil)
			f.change(t, v1, v2)
			clk.Step(time.Second)
			f.change(t, v2, secret("db", "3", nil))
			if patches := f.sync(t); len(patches) != 0 {
				t.Fatalf("a sync within the burst wrote %v; want nothing until the debounce is over", patches)
			}
			clk.Step(time.Second)
			if patches := f.sync(t); len(patches) != 1 || patches[0]["rollout"] != "yes" {
				t.Fatalf("the sync after the burst's debounce wrote %v; want one rollout", patches)
			}
		})
	}
}

// A workload whose pod template courier sees change after an input change,
// but which was written before it (each informer delivers its own kind in
// order, not the kinds in the order of their writes), is rolled out: the
// pods its template change started may hold the old content. A template
// written after the input's change is the workload's own rollout, which
// gives its new pods the new content.
func TestATemplateChangeWrittenBeforeAnInputsButSeenAfterItRollsOut(t *testing.T) {
	for _, tt := range []struct {
		written string // the template change's resourceVersion; the input's is 10
		rolls   bool
	}{{"8", true}, {"12", false}} {
		t.Run("template written at "+tt.written, func(t *testing.T) {
			d := deployment(map[string]string{wellknown.Reload: "true"}, false, "db")
			v1 := secret("db", "1", nil)
			v1.ResourceVersion = "2"
			f := newFixture(t, Options{}, v1, d)
			d = f.baselined(t, d)
			v2 := secret("db", "2", nil)
			v2.ResourceVersion = "10"
			f.change(t, v1, v2)

			indexer := f.inf.Workloads()[workload.Deployment].GetIndexer()
			before, _, _ := indexer.GetByKey("app/web")
			d = d.DeepCopy()
			d.ResourceVersion = tt.written
			d.Spec.Template.Labels = map[string]string{"edited": "yes"}
			f.put(t, d)
			after, _, _ := indexer.GetByKey("app/web")
			f.c.onWorkloadUpdate(before, after)

			patches := f.sync(t)
			if len(patches) != 1 {
				t.Fatalf("%d patches, want 1 (a rollout, or the baseline of the own rollout)", len(patches))
			}
			if got := patches[0]["rollout"] == "yes"; got != tt.rolls {
				t.Errorf("rolled out: %v, want %v", got, tt.rolls)
			}
		})
	}
}

// reloadedEvents drains the recorder and counts its Reloaded Events.
func (f *fixture) reloadedEvents() int { return f.events(wellknown.ReasonReloaded) }

// events drains the recorder and counts its Events of reason.
func (f *fixture) events(reason string) int {
	n := 0
	for len(f.recorder.Events) > 0 {
		if e := <-f.recorder.Events; strings.Contains(e, " "+reason+" ") {
			n++
		}
	}
	return n
}

// failedRollout syncs app/web, whose rollout patch fails with err, the
// API server having applied it or not, and stores the Deployment as the
// API server then holds it.
func (f *fixture) failedRollout(t *testing.T, err error, applied bool) {
	t.Helper()
	f.failRollout(t, err, applied)
	f.stored(t)
}

// failRollout is failedRollout with the cache not caught up yet.
func (f *fixture) failRollout(t *testing.T, err error, applied bool) {
	t.Helper()
	failed := false
	f.client.PrependReactor("patch", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if failed {
			return false, nil, nil
		}
		failed = true
		if applied {
			if _, _, err := k8stesting.ObjectReaction(f.client.Tracker())(a); err != nil {
				t.Error(err)
			}
		}
		return true, nil, err
	})
	if err := f.c.sync(t.Context(), key{Kind: workload.Deployment, Namespace: "app", Name: "web"}); err == nil {
		t.Fatal("the rollout's patch failed, and sync returned no error")
	}
}

// stored puts app/web in the cache as the API server holds it.
func (f *fixture) stored(t *testing.T) {
	t.Helper()
	now, err := f.client.AppsV1().Deployments("app").Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.put(t, now)
}

// A rollout whose patch failed may have been made all the same: when the
// next sync finds the workload as that patch left it, the rollout is told
// once (its Event) and nothing is written; when it was not made, the next
// sync makes it, and tells it once. So with a rollout not made
// (courier.dev/reload: notify), whose patch writes only the baseline.
func TestARolloutWhoseAnswerIsLostIsToldOnce(t *testing.T) {
	for _, mode := range []struct{ reload, reason string }{
		{"true", wellknown.ReasonReloaded},
		{wellknown.ReloadNotify, wellknown.ReasonReloadNotified},
	} {
		t.Run("reload="+mode.reload, func(t *testing.T) { lostAnswers(t, mode.reload, mode.reason) })
	}
}

func lostAnswers(t *testing.T, reload, reason string) {
	for _, tc := range []struct {
		name    string
		err     error
		applied bool
		patches int // the next sync's
	}{
		{"etcd timed out, and committed it", apierrors.NewInternalError(errors.New("etcdserver: request timed out")), true, 0},
		{"the API server timed out, and nothing was committed", apierrors.NewTimeoutError("request timed out", 1), false, 1},
		{"the connection broke after the API server applied it", errors.New("http2: client connection lost"), true, 0},
		{"client-go resent a patch the API server had applied", apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("the object has been modified")), true, 0},
		{"refused", apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("no")), false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := deployment(map[string]string{wellknown.Reload: reload}, false, "db")
			f := newFixture(t, Options{}, secret("db", "1", nil), d)
			f.baselined(t, d)
			f.put(t, secret("db", "2", nil))
			f.failedRollout(t, tc.err, tc.applied)
			if n := f.events(reason); n != 0 {
				t.Fatalf("%d %s Events for a rollout whose patch failed", n, reason)
			}
			if patches := f.sync(t); len(patches) != tc.patches {
				t.Fatalf("the next sync wrote %v, want %d patches", patches, tc.patches)
			}
			if n := f.events(reason); n != 1 {
				t.Fatalf("%d %s Events after the next sync, want 1", n, reason)
			}
			f.stored(t)
			if patches := f.sync(t); len(patches) != 0 || f.events(reason) != 0 {
				t.Fatalf("a third sync wrote %v or told a rollout again", patches)
			}
		})
	}
}

// A rollout whose patch meets NotFound (the workload deleted while the sync
// waited for its turn) leaves no record: it was not made, and the deletion
// that would forget the record came before it (before the fix: kept for
// the life of the process).
func TestARolloutOfAWorkloadDeletedMeanwhileLeavesNoRecord(t *testing.T) {
	for _, reload := range []string{"true", wellknown.ReloadNotify} {
		t.Run("reload="+reload, func(t *testing.T) {
			d := deployment(map[string]string{wellknown.Reload: reload}, false, "db")
			f := newFixture(t, Options{}, secret("db", "1", nil), d)
			f.baselined(t, d)
			f.put(t, secret("db", "2", nil))
			f.failedRollout(t, apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web"), false)
			f.c.mu.Lock()
			defer f.c.mu.Unlock()
			if len(f.c.lost) != 0 {
				t.Errorf("%d records of failed rollouts, want none", len(f.c.lost))
			}
		})
	}
}

// A change made after a rollout whose answer was lost is not dropped: the
// sync that tells the lost rollout goes on and rolls the change out.
func TestAChangeAfterALostRolloutStillRollsOut(t *testing.T) {
	d := deployment(map[string]string{wellknown.Reload: "true"}, false, "db")
	f := newFixture(t, Options{}, secret("db", "1", nil), d)
	f.baselined(t, d)
	f.put(t, secret("db", "2", nil))
	f.failedRollout(t, apierrors.NewInternalError(errors.New("etcdserver: request timed out")), true)
	if n := f.reloadedEvents(); n != 0 {
		t.Fatalf("%d Reloaded Events for a rollout whose patch failed", n)
	}
	f.put(t, secret("db", "3", nil))
	patches := f.sync(t)
	if len(patches) != 1 || patches[0]["rollout"] != "yes" {
		t.Fatalf("the sync after the lost rollout wrote %v; want the change made since rolled out", patches)
	}
	if n := f.reloadedEvents(); n != 2 {
		t.Fatalf("%d Reloaded Events, want 2: the lost rollout's and the new one's", n)
	}
}

// A rollout whose answer was lost, and a sync that runs before the cache
// shows it (another change seen first): whether that sync's own rollout,
// made against the version the lost one replaced, conflicts, or it decides
// nothing is to roll out (the input changed back), the lost rollout stays
// recorded (before the fix: replaced, or dropped as taken in, and never
// told); once the cache catches up it is told, and the change made since
// rolls out.
func TestALostRolloutIsToldAfterASyncOnAStaleCache(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stale func(*testing.T, *fixture)
	}{
		{"its own rollout conflicts", func(t *testing.T, f *fixture) {
			f.put(t, secret("db", "3", nil))
			f.failRollout(t, apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("the object has been modified")), false)
		}},
		{"it rolls nothing out", func(t *testing.T, f *fixture) {
			f.put(t, secret("db", "1", nil))
			if patches := f.sync(t); len(patches) != 0 {
				t.Fatalf("the sync on the stale cache wrote %v; want nothing: the input is as the cache's baseline says", patches)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := deployment(map[string]string{wellknown.Reload: "true"}, false, "db")
			f := newFixture(t, Options{}, secret("db", "1", nil), d)
			f.baselined(t, d)
			f.put(t, secret("db", "2", nil))
			f.failRollout(t, apierrors.NewInternalError(errors.New("etcdserver: request timed out")), true)
			tc.stale(t, f)
			f.stored(t)
			patches := f.sync(t)
			if len(patches) != 1 || patches[0]["rollout"] != "yes" {
				t.Fatalf("the sync on the caught-up cache wrote %v; want the change made since rolled out", patches)
			}
			if n := f.reloadedEvents(); n != 2 {
				t.Fatalf("%d Reloaded Events, want 2: the lost rollout's and the new one's", n)
			}
		})
	}
}

// A rollout whose patch failed is remembered across terms, and told in a
// later one if it was made — unless another leader made and told it in
// between (its record has another time): then it is not told twice.
func TestALostRolloutMadeByTheNextLeaderIsNotToldAgain(t *testing.T) {
	d := deployment(map[string]string{wellknown.Reload: "true"}, false, "db")
	f := newFixture(t, Options{}, secret("db", "1", nil), d)
	f.baselined(t, d)
	f.put(t, secret("db", "2", nil))
	f.failedRollout(t, apierrors.NewTimeoutError("request timed out", 1), false)
	lost := map[types.UID][]unansweredRollout{} // this process's; the next leader's sync is played by f.c
	for uid, rs := range f.c.lost {
		lost[uid] = slices.Clone(rs)
	}
	f.c.opts.Clock.(*testingclock.FakeClock).Step(20 * time.Second)
	if patches := f.sync(t); len(patches) != 1 || f.reloadedEvents() != 1 {
		t.Fatalf("the next leader wrote %v; want the rollout, told once", patches)
	}
	f.stored(t)
	f.c.lost = lost // this process leads again
	if patches := f.sync(t); len(patches) != 0 {
		t.Fatalf("this process's next term wrote %v; want nothing", patches)
	}
	if n := f.reloadedEvents(); n != 0 {
		t.Fatalf("%d Reloaded Events: the next leader's rollout told again", n)
	}
}

// A rollout patch that conflicts (the cache had yet to see the workload
// controller's own status write) is retried, not counted as a reload error:
// CourierReloadErrors alerts on that count. A refusal is counted.
func TestAConflictedRolloutIsNoReloadError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		errors float64
	}{
		{"conflict", apierrors.NewConflict(appsv1.Resource("deployments"), "web", errors.New("the object has been modified")), 0},
		{"gone", apierrors.NewNotFound(appsv1.Resource("deployments"), "web"), 0},
		{"refused", apierrors.NewForbidden(appsv1.Resource("deployments"), "web", errors.New("denied by policy")), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := deployment(map[string]string{wellknown.Reload: "true"}, false, "db")
			f := newFixture(t, Options{}, secret("db", "v1", nil), d)
			f.baselined(t, d)
			f.put(t, secret("db", "v2", nil))
			f.failRollout(t, tc.err, false)
			if got := testutil.ToFloat64(f.c.metrics.reloads.WithLabelValues(workload.Deployment, "error")); got != tc.errors {
				t.Errorf("courier_reloader_reloads_total{result=\"error\"} = %v, want %v", got, tc.errors)
			}
		})
	}
}

// A rollout whose answer is lost to etcd's timeout hears of it seconds
// after it was written: the failure is recorded with the record as written,
// whose time the workload then carries, so the next sync (or the next
// term's) finds it made and tells it. Before the fix the record was made
// again at the failure, a second or more later, and the rollout was never
// told (TestARolloutWhoseAnswerIsLostAsTheTermEndsIsToldInTheNext failed
// when its write crossed a second).
func TestALostRolloutWhoseAnswerTookSecondsIsStillTold(t *testing.T) {
	d := deployment(map[string]string{wellknown.Reload: "true"}, false, "db")
	f := newFixture(t, Options{}, secret("db", "1", nil), d)
	f.baselined(t, d)
	f.put(t, secret("db", "2", nil))
	clk := f.c.opts.Clock.(*testingclock.FakeClock)
	failed := false
	f.client.PrependReactor("patch", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if failed {
			return false, nil, nil
		}
		failed = true
		if _, _, err := k8stesting.ObjectReaction(f.client.Tracker())(a); err != nil {
			t.Error(err)
		}
		clk.Step(7 * time.Second) // etcd's request timeout
		return true, nil, apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
	})
	if err := f.c.sync(t.Context(), key{Kind: workload.Deployment, Namespace: "app", Name: "web"}); err == nil {
		t.Fatal("the rollout's patch failed, and sync returned no error")
	}
	f.stored(t)
	if patches := f.sync(t); len(patches) != 0 {
		t.Fatalf("the next sync wrote %v: the rollout was made", patches)
	}
	if n := f.events(wellknown.ReasonReloaded); n != 1 {
		t.Fatalf("%d Reloaded Events after the next sync, want 1", n)
	}
}

// An input the cache holds the metadata of only (no workload consumed it
// when the cache saw it: a Secret applied before its Deployment, as GitOps
// tools apply them) is read once per resourceVersion, and its change rolls
// its consumers out as one held as digests does (#51). One the API server
// no longer has as the cache saw it is retried, never taken as missing.
func TestAnInputHeldAsMetadataOnlyIsReadOnce(t *testing.T) {
	f, v1, d := readingFixture(t)
	metadataOnly := func(s *corev1.Secret) any { return f.metadataOnly(t, s) }
	reads := f.reads
	old := metadataOnly(v1)
	f.baselined(t, d)
	if got := f.sync(t); len(got) != 0 || reads() != 1 {
		t.Fatalf("a second sync wrote %v after %d reads; want nothing after one read", got, reads())
	}

	v2 := v1.DeepCopy()
	v2.ResourceVersion, v2.Data["k"] = "2", []byte("v2")
	if _, err := f.client.CoreV1().Secrets("app").Update(t.Context(), v2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.c.inputHandler(wellknown.KindSecret, f.inf.Secrets.Informer().GetIndexer()).OnUpdate(old, metadataOnly(v2))
	if got := f.sync(t); len(got) != 1 || got[0]["rollout"] != "yes" || reads() != 2 {
		t.Fatalf("after the change: %v after %d reads; want one rollout after two reads", got, reads())
	}

	// Gone from the API server, not yet from the cache.
	v3 := v2.DeepCopy()
	v3.ResourceVersion = "3"
	metadataOnly(v3)
	if err := f.client.CoreV1().Secrets("app").Delete(t.Context(), "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	if err := f.c.sync(t.Context(), key{Kind: workload.Deployment, Namespace: "app", Name: "web"}); err == nil || !strings.Contains(err.Error(), "gone or replaced") {
		t.Fatalf("sync: %v; want an error saying the input is gone or replaced since the cache saw it", err)
	}
	for _, a := range f.client.Actions() {
		if _, ok := a.(k8stesting.PatchAction); ok {
			t.Errorf("an input the API server no longer has wrote %v", a)
		}
	}
}

// readingFixture is a fixture of the workload app/web, which reloads for
// the Secret db (UID u, resourceVersion 1), held as its metadata only and
// read from the fake API server.
func readingFixture(t *testing.T) (*fixture, *corev1.Secret, *appsv1.Deployment) {
	t.Helper()
	v1 := secret("db", "v1", nil)
	v1.UID, v1.ResourceVersion = "u", "1"
	d := deployment(map[string]string{wellknown.Reload: "true"}, false, "db")
	f := newFixture(t, Options{}, v1, d)
	f.c.opts.Read = informers.NewReader(f.client, informers.Scope{}).Read
	return f, v1, d
}

// reads is how many inputs the reloader read.
func (f *fixture) reads() int { return int(testutil.ToFloat64(f.c.metrics.reads)) }

// metadataOnly stores s in the cache as the informers do when no workload
// consumes it (content.MetadataOnly), and returns what it stored.
func (f *fixture) metadataOnly(t *testing.T, s *corev1.Secret) any {
	t.Helper()
	x, _ := informers.Transform(informers.SourcesIn(role.Config{Namespace: "courier"}), nil)(s.DeepCopyObject())
	if content.Read(x) {
		t.Fatal("the transform kept the digests of an input no workload consumes")
	}
	if err := f.inf.Secrets.Informer().GetIndexer().Update(x); err != nil {
		t.Fatal(err)
	}
	return x
}

// An input held as its metadata only, consumed by a workload that does not
// opt in, is not read while it does not opt in; given courier.dev/reload in
// the same update as a change, it rolls the workload out, as one held as
// digests does (SPEC: "a change made in the same update as that opt-in rolls
// out every consumer courier had seen"): the consumer reads the input as it
// was at its version before the change.
func TestAnInputOptedInWithAChangeRollsOutAConsumerThatDidNotOptIn(t *testing.T) {
	v1 := secret("db", "v1", nil)
	v1.UID, v1.ResourceVersion = "u", "1"
	d := deployment(nil, false, "db")
	f := newFixture(t, Options{}, v1, d)
	f.c.opts.Read = informers.NewReader(f.client, informers.Scope{}).Read
	var readAt []string
	f.c.opts.ReadAt = func(_ context.Context, kind, namespace, name, version string) (runtime.Object, error) {
		readAt = append(readAt, version)
		if version == "1" {
			return v1.DeepCopy(), nil // etcd's history: the fake clientset keeps none
		}
		return nil, fmt.Errorf("version %s compacted", version)
	}
	old := f.metadataOnly(t, v1)
	f.client.ClearActions()
	if got := f.sync(t); len(got) != 0 {
		t.Fatalf("a workload that did not opt in was patched: %v", got)
	}
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "list" {
			t.Errorf("an input of a workload that does not opt in was read: %v", a)
		}
	}
	v2 := secret("db", "v2", map[string]string{wellknown.Reload: "true"})
	v2.UID, v2.ResourceVersion = "u", "2"
	if _, err := f.client.CoreV1().Secrets("app").Update(t.Context(), v2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.put(t, v2) // now consumed: held as digests
	n, _, _ := f.inf.Secrets.Informer().GetIndexer().GetByKey("app/db")
	f.c.inputHandler(wellknown.KindSecret, f.inf.Secrets.Informer().GetIndexer()).OnUpdate(old, n)
	if got := f.sync(t); len(got) != 1 || got[0]["rollout"] != "yes" {
		t.Fatalf("after the opt-in with a change: %v, want one rollout", got)
	}
	if len(readAt) != 1 || readAt[0] != "1" {
		t.Errorf("read at versions %v, want once at 1 (its version before the change)", readAt)
	}
}

// A digest key whose managed-by label someone removed is held as its
// metadata only (the informers watch only what courier manages whole):
// ensureKey labels it again, so the cache holds it whole once more, rather
// than making another key or failing for want of one.
func TestADigestKeyThatLostItsManagedByLabelIsLabelledAgain(t *testing.T) {
	key := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "courier", Name: KeySecret,
		Labels: map[string]string{wellknown.DigestKey: "true"}}, Data: map[string][]byte{"key": make([]byte, 32)}}
	f := newFixture(t, Options{}, key)
	if err := f.inf.Secrets.Informer().GetIndexer().Update(content.FromMetadata(&metav1.PartialObjectMetadata{ObjectMeta: key.ObjectMeta}, true, true)); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_ = f.c.ensureKey(ctx) // the fake cache never sees the label come back: it times out
	var labelled bool
	for _, a := range f.client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && p.GetName() == KeySecret &&
			strings.Contains(string(p.GetPatch()), `"`+wellknown.ManagedBy+`":"`+wellknown.ManagedByValue+`"`) {
			labelled = true
		}
		if a.GetVerb() == "create" {
			t.Errorf("another digest key was made: %v", a)
		}
	}
	if !labelled {
		t.Errorf("the digest key was not labelled %s=%s again: %v", wellknown.ManagedBy, wellknown.ManagedByValue, f.client.Actions())
	}
}

// A workload created just after a change made together with its input's
// opt-in, which courier's cache of workloads saw before it saw the change
// (two watches, no order between them), is at its first sight: no rollout
// (SPEC: "a workload created with it, even in the same second, is at its
// first sight"). One written since the change (its resourceVersion later
// than the change's) existed before it only if the API server says so at
// the change's version; one it cannot answer for rolls out, as before.
func TestAWorkloadCreatedAfterAChangeWithItsOptInIsAtItsFirstSight(t *testing.T) {
	tests := []struct {
		name    string
		version string // the workload's, in the cache when the change is seen (the change is 4)
		existed func() (bool, error)
		asked   bool
		rolls   bool
	}{
		{"written before the change", "3", nil, false, true},
		{"created after it", "5", func() (bool, error) { return false, nil }, true, false},
		{"written since, existing before it", "5", func() (bool, error) { return true, nil }, true, true},
		{"the API server cannot say (compacted)", "5", func() (bool, error) { return false, errors.New("compacted") }, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v1 := secret("db", "v1", nil)
			v1.UID, v1.ResourceVersion = "u", "1"
			d := deployment(nil, false, "db")
			d.UID, d.ResourceVersion = "w", tt.version
			f := newFixture(t, Options{}, v1, d)
			f.c.opts.ReadAt = func(context.Context, string, string, string, string) (runtime.Object, error) {
				return v1.DeepCopy(), nil
			}
			asked := false
			f.c.opts.ExistedAt = func(_ context.Context, gvr schema.GroupVersionResource, namespace, name string, uid types.UID, version string) (bool, error) {
				asked = true
				if gvr.Resource != "deployments" || namespace != "app" || name != "web" || uid != "w" || version != "4" {
					t.Errorf("asked of %v %s/%s (%s) at %s, want deployments app/web (w) at 4", gvr, namespace, name, uid, version)
				}
				return tt.existed()
			}
			old := f.metadataOnly(t, v1)
			v2 := secret("db", "v2", map[string]string{wellknown.Reload: "true"})
			v2.UID, v2.ResourceVersion = "u", "4"
			if _, err := f.client.CoreV1().Secrets("app").Update(t.Context(), v2, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			f.put(t, v2)
			n, _, _ := f.inf.Secrets.Informer().GetIndexer().GetByKey("app/db")
			f.c.inputHandler(wellknown.KindSecret, f.inf.Secrets.Informer().GetIndexer()).OnUpdate(old, n)
			got := f.sync(t)
			if len(got) != 1 || (got[0]["rollout"] == "yes") != tt.rolls {
				t.Errorf("patches %v, want one, rolling out: %v", got, tt.rolls)
			}
			if asked != tt.asked {
				t.Errorf("asked the API server: %v, want %v", asked, tt.asked)
			}
		})
	}
}
