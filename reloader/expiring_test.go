package reloader

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/courier-k8s/courier/informers"
)

// TestExpiringLifetimes: an entry lives until deleted or its ttl after it
// was last set; a Set sweeps what expired, once per ttl; a Set's next sees
// only what has not expired; an Update changes a live entry only, and
// does not make it live longer.
func TestExpiringLifetimes(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC))
	e := newExpiring[string, int](10*time.Second, clock.Now)
	set := func(k string, v int) { e.Set(k, func(int, bool) int { return v }) }
	get := func(k string) (int, bool) { v, _, ok := e.Get(k); return v, ok }

	set("a", 1)
	clock.Step(10 * time.Second)
	if v, ok := get("a"); !ok || v != 1 {
		t.Fatalf("a at its ttl: %d, %v", v, ok)
	}
	clock.Step(time.Millisecond)
	if _, ok := get("a"); ok {
		t.Fatal("a past its ttl is still there")
	}
	set("b", 2) // sweeps a
	if n := e.Len(); n != 1 {
		t.Fatalf("%d entries after the sweep, want 1 (b)", n)
	}
	e.Update("a", func(int) int { return 7 })
	if _, ok := get("a"); ok || e.Len() != 1 {
		t.Fatalf("an Update of nothing made an entry (%d entries)", e.Len())
	}
	e.Update("b", func(v int) int { return v * 10 })
	if v, ok := get("b"); !ok || v != 20 {
		t.Fatalf("b after an Update: %d, %v; want 20", v, ok)
	}
	clock.Step(10*time.Second + time.Millisecond)
	if _, ok := get("b"); ok {
		t.Fatal("an Update made b live past its ttl")
	}
	clock.Step(-10*time.Second - time.Millisecond)
	clock.Step(5 * time.Second)
	set("b", 3) // set again: lives another ttl from now
	clock.Step(8 * time.Second)
	if v, ok := get("b"); !ok || v != 3 {
		t.Fatalf("b set again 8 s ago: %d, %v", v, ok)
	}
	e.Set("b", func(old int, ok bool) int {
		if !ok || old != 3 {
			t.Errorf("next of a live entry saw %d, %v", old, ok)
		}
		return old + 1
	})
	clock.Step(11 * time.Second)
	e.Set("b", func(old int, ok bool) int {
		if ok {
			t.Errorf("next of an expired entry saw %d as live", old)
		}
		return 9
	})
	e.Delete("b")
	if _, ok := get("b"); ok || e.Len() != 0 {
		t.Fatalf("b deleted, yet there (%d entries)", e.Len())
	}
}

// TestTemplateRecordsLiveAsLongAsTheirWorkload: a workload's template
// record goes with the workload, and without a sync or a deletion after
// hintTTL; a hint goes after hintTTL.
func TestTemplateRecordsLiveAsLongAsTheirWorkload(t *testing.T) {
	f := newFixture(t, Options{Debounce: 2 * time.Second})
	clock := f.c.opts.Clock.(*testingclock.FakeClock)
	d := deployment(nil, false, "a")
	d.UID = types.UID("uid-1")
	f.put(t, d)
	obj, _, _ := f.inf.Workloads()["Deployment"].GetIndexer().GetByKey(d.Namespace + "/" + d.Name)
	f.c.rememberTemplate(obj, "5")
	if _, ok := f.c.templateBefore(d.UID); !ok {
		t.Fatal("no template record after an input change")
	}
	f.c.onWorkloadDelete(obj)
	if n := f.c.templates.Len(); n != 0 {
		t.Fatalf("%d template records after the workload went", n)
	}
	f.c.rememberTemplate(obj, "5")
	f.c.remember(informers.InputKey("Secret", d.Namespace, "a"), secret("a", "old", nil), "", "4")
	clock.Step(hintTTL(2*time.Second) + time.Millisecond)
	if _, ok := f.c.templateBefore(d.UID); ok {
		t.Error("a template record outlived hintTTL")
	}
	if _, ok := f.c.previous(t.Context(), key{Kind: "Deployment", Namespace: d.Namespace, Name: d.Name}, d.UID, "Secret", "a"); ok {
		t.Error("a hint outlived hintTTL")
	}
}
