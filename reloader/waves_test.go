package reloader

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

func TestWaveOf(t *testing.T) {
	for _, tc := range []struct {
		value   *string
		compat  bool
		want    int
		invalid bool
	}{
		{value: nil, want: 0},
		{value: nil, compat: true, want: noWave},
		{value: str("0"), want: 0},
		{value: str("3"), compat: true, want: 3},
		{value: str("9"), want: 9},
		{value: str("10"), want: lastWave, invalid: true},
		{value: str("-1"), want: lastWave, invalid: true},
		{value: str("01"), want: lastWave, invalid: true},
		{value: str(""), want: lastWave, invalid: true},
		{value: str("first"), want: lastWave, invalid: true},
	} {
		a := map[string]string{}
		if tc.value != nil {
			a[wellknown.ReloadWave] = *tc.value
		}
		got, err := waveOf(a, tc.compat)
		if got != tc.want || (err != nil) != tc.invalid {
			t.Errorf("waveOf(%v, compat %v) = %d, %v; want %d, invalid %v", a, tc.compat, got, err, tc.want, tc.invalid)
		}
	}
}

func str(s string) *string { return &s }

// TestWaitingTellsOnce: a workload held by a wave is told once per message,
// each halted input once, and the gauges count halted inputs (not the
// workloads held on them) and waiting workloads, until the term ends.
func TestWaitingTellsOnce(t *testing.T) {
	w := newWaiting(prometheus.NewRegistry())
	now := time.Now()
	a := key{Kind: workload.Deployment, Namespace: "a", Name: "app"}
	b := key{Kind: workload.Deployment, Namespace: "b", Name: "app"}
	wait := verdict{message: "waiting for db", hold: &hold{on: []key{db}}}
	halted := verdict{message: "halted by db", hold: &hold{on: []key{db}, halts: []halt{{input: "secret/ca"}}}}

	type step struct {
		news   bool
		halts  []string
		halted float64
		count  float64
	}
	var got []step
	record := func(k key, v verdict) {
		news, halts := w.set(k, now, now, v)
		got = append(got, step{news, halts, testutil.ToFloat64(w.halted), testutil.ToFloat64(w.waiters)})
	}
	record(a, wait)
	record(a, wait)
	record(a, halted)
	record(a, halted)
	record(b, halted)
	record(a, verdict{})
	want := []step{
		{news: true, count: 1},
		{news: false, count: 1},
		{news: true, halts: []string{"Secret/a/ca"}, halted: 1, count: 1},
		{news: false, halted: 1, count: 1},
		{news: true, halts: []string{"Secret/b/ca"}, halted: 1, count: 2}, // b's input is another namespace's copy: one input is counted per namespace
		{news: true, halted: 1, count: 1},
	}
	want[4].halted = 2
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(step{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[key]time.Time{b: now}, w.waitingOn(db)); diff != "" {
		t.Errorf("waiting on db (-want +got):\n%s", diff)
	}
	w.reset()
	if n := testutil.ToFloat64(w.halted) + testutil.ToFloat64(w.waiters); n != 0 || len(w.waitingOn(db)) != 0 {
		t.Errorf("after the term: gauges %v, waiting %v", n, w.waitingOn(db))
	}
}

// TestWaitingRemembersWhatHaltsItForItsChangeOnly: since gives the
// workloads that halted a wait (with their health then) for the same
// change, and none for a newer one or once it is no longer halted.
func TestWaitingRemembersWhatHaltsItForItsChangeOnly(t *testing.T) {
	w := newWaiting(prometheus.NewRegistry())
	now := time.Now()
	a := key{Kind: workload.Deployment, Namespace: "a", Name: "app"}
	d := &decision{baseline: baseline{"secret/ca": "2"}}
	halted := verdict{d: d, message: "halted by db", hold: &hold{on: []key{db}, halts: []halt{{input: "secret/ca", by: ahead{key: db, health: workload.Failed}}}}}
	w.set(a, now, now, halted)
	if _, by := w.since(a, targetOf(halted), now.Add(time.Second)); !cmp.Equal(by, map[key]workload.Health{db: workload.Failed}) {
		t.Errorf("halted by %v, want db, failed", by)
	}
	if since, by := w.since(a, "another change", now.Add(time.Second)); by != nil || !since.Equal(now.Add(time.Second)) {
		t.Errorf("a newer change: halted by %v since %v, want nothing, now", by, since)
	}
	w.set(a, now, now, verdict{d: d, message: "waiting for db", hold: &hold{on: []key{db}}})
	if _, by := w.since(a, targetOf(halted), now); by != nil {
		t.Errorf("no longer halted: halted by %v, want nothing", by)
	}
}
