package reloader

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-k8s/courier/internal/heap"
	"github.com/courier-k8s/courier/internal/objmeta"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// TestBudgetKeepsAtMostMaxInFlightAndLetsTheRestGoInOrder walks
// --reload-max-in-flight=2 through a change of five workloads: two take
// the slots, the rest queue; each one the cache shows healthy frees a slot
// for the next in order (wave, then namespace/name), and a failed write
// gives its slot back.
func TestBudgetKeepsAtMostMaxInFlightAndLetsTheRestGoInOrder(t *testing.T) {
	b := newBudget(2, prometheus.NewRegistry())
	k := func(ns string) key { return key{Kind: workload.Deployment, Namespace: ns, Name: "app"} }
	cached := func(rolled bool, record string, h workload.Health) *workload.Object {
		a := map[string]string{wellknown.ConfigInputs: record}
		if rolled {
			a[wellknown.ReloadedAt] = "2026-11-29T00:00:00Z"
		}
		return &workload.Object{Meta: objmeta.From(&metav1.ObjectMeta{Annotations: a}, true), Health: h}
	}
	// observe: the cache shows workload ns/app rolled out by courier,
	// recorded as record, with health h.
	observe := func(ns, record string, h workload.Health) []queued {
		return b.observe(k(ns), cached(true, record, h), h != workload.Healthy)
	}
	seen := time.Now()
	names := func(qs []queued) []string {
		var out []string
		for _, q := range qs {
			out = append(out, q.key.Namespace)
		}
		return out
	}
	take := func(ns string, wave int) bool {
		ok := b.room(k(ns), wave, seen, "old", true)
		return ok
	}
	if !take("a", 0) || !take("b", 0) {
		t.Fatal("the first two rollouts found no slot")
	}
	for _, ns := range []string{"e", "c", "d"} {
		if take(ns, map[string]int{"e": 0, "c": 1, "d": 0}[ns]) {
			t.Fatalf("%s rolled out past the budget", ns)
		}
	}
	if n := testutil.ToFloat64(b.gauge); n != 2 {
		t.Errorf("in flight %v, want 2", n)
	}
	// The cache shows a's rollout, not yet healthy: still two.
	if got := observe("a", "new", workload.Progressing); got != nil {
		t.Errorf("a slot freed by a rollout in progress: %v", names(got))
	}
	// a healthy: the first in order (wave 0: d, e; wave 1: c) goes.
	if diff := cmp.Diff([]string{"d"}, names(observe("a", "new", workload.Healthy))); diff != "" {
		t.Errorf("let go (-want +got):\n%s", diff)
	}
	if take("e", 0) {
		t.Error("e took the slot owed to d")
	}
	if !take("d", 0) {
		t.Error("d found no slot")
	}
	// b's write failed: its slot goes to e.
	if diff := cmp.Diff([]string{"e"}, names(b.giveBack(k("b")))); diff != "" {
		t.Errorf("after a failed write (-want +got):\n%s", diff)
	}
	// d's workload deleted: two slots free, for e (still waiting) and c.
	if diff := cmp.Diff([]string{"e", "c"}, names(b.observe(k("d"), nil, false))); diff != "" {
		t.Errorf("after a deletion (-want +got):\n%s", diff)
	}
	// A rollout whose earlier one is still in flight holds its slot already.
	observe("x", "x", workload.Progressing)
	if ok := b.room(k("x"), 0, seen, "x", false); !ok {
		t.Error("a workload in flight was refused a slot it holds")
	}
	// Kinds no wave waits for take no slot.
	if ok := b.room(key{Kind: workload.Job, Namespace: "j", Name: "j"}, 0, seen, "", true); !ok {
		t.Error("a Job waited for a slot")
	}
	b.reset()
	if n := testutil.ToFloat64(b.gauge); n != 1 { // x, as the cache shows it
		t.Errorf("after the term: in flight %v, want 1", n)
	}
}

// TestABudgetHoldsNoRoomForItsBusiestMoment: a source update puts thousands
// of rollouts in flight at once; once they are healthy, the budget holds
// nothing of them (its maps made anew), also when one of them never gets
// healthy.
func TestABudgetHoldsNoRoomForItsBusiestMoment(t *testing.T) {
	const n = 100000
	obj := &workload.Object{Meta: objmeta.From(&metav1.ObjectMeta{Annotations: map[string]string{wellknown.ReloadedAt: "2026-11-29T00:00:00Z"}}, true)}
	keys := make([]key, n)
	for i := range keys {
		keys[i] = key{Kind: workload.Deployment, Namespace: fmt.Sprintf("team-%05d", i), Name: "app"}
	}
	for _, stuck := range []int{0, 1} {
		b := newBudget(10, prometheus.NewRegistry())
		before := heap.Live()
		for _, k := range keys {
			b.observe(k, obj, true)
		}
		full := heap.Live()
		for _, k := range keys[stuck:] {
			b.observe(k, obj, false)
		}
		after := heap.Live()
		runtime.KeepAlive(b)
		t.Logf("%d never healthy: live heap %d KiB before, %d KiB with %d in flight, %d KiB after", stuck, before>>10, full>>10, n, after>>10)
		if full < before+1<<20 {
			t.Fatalf("%d rollouts in flight grew the heap by only %d KiB: the test measures nothing", n, (full-before)>>10)
		}
		if after > before+256<<10 {
			t.Errorf("with %d never healthy, the budget holds %d KiB after the rest are healthy, want its room gone", stuck, (after-before)>>10)
		}
	}
	runtime.KeepAlive(keys)
}
