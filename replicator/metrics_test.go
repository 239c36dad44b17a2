package replicator

import (
	"fmt"
	"maps"
	"runtime"
	"testing"
	"unique"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/courier-k8s/courier/internal/heap"
)

// TestLatencyExistsBeforeTheFirstWrite: rate() sees a histogram's first
// observation only as an increase from a sample before it, so each kind's
// latency series exists, at 0, from the start.
func TestLatencyExistsBeforeTheFirstWrite(t *testing.T) {
	reg := prometheus.NewRegistry()
	newMetrics(reg, newStates())
	if n := testutil.CollectAndCount(reg, "courier_replicator_replication_latency_seconds"); n != 2 {
		t.Errorf("%d latency series before any write, want one per kind (2)", n)
	}
}

// TestStatesCountEachPairOnceWhateverItsStrings: a pair's state is found again from
// a key made of other strings with the same text (states interns them),
// counted once per pair, and forgotten with its pair or its cluster.
func TestStatesCountEachPairOnceWhateverItsStrings(t *testing.T) {
	s := newStates()
	reg := prometheus.NewRegistry()
	newMetrics(reg, s)
	fresh := func(kind, ns, name, target, cluster string) key {
		c := func(v string) string { return string([]byte(v)) } // a new string each time
		return key{Kind: c(kind), Namespace: c(ns), Name: c(name), Target: c(target), Cluster: c(cluster)}
	}
	s.put(fresh(kindSecret, "platform", "shared", "team-a", ""), StateInSync)
	s.put(fresh(kindSecret, "platform", "shared", "team-b", ""), StateInSync)
	s.put(fresh(kindSecret, "platform", "shared", "team-a", ""), StateConflict)
	s.put(fresh(kindSecret, "platform", "shared", "team-a", "east"), StateError)
	want := map[[2]string]int{{kindSecret, StateInSync}: 1, {kindSecret, StateConflict}: 1}
	if got := s.counts(); !maps.Equal(got, want) {
		t.Errorf("counts %v, want %v (the remote pair counted apart)", got, want)
	}
	if got := testutil.ToFloat64(s.remote.WithLabelValues("east", kindSecret, StateError)); got != 1 {
		t.Errorf("east's error pairs %v, want 1", got)
	}
	s.forget(fresh(kindSecret, "platform", "shared", "team-a", ""))
	s.forgetCluster(string([]byte("east")))
	want = map[[2]string]int{{kindSecret, StateInSync}: 1}
	if got := s.counts(); !maps.Equal(got, want) || len(s.m) != 1 {
		t.Errorf("after forgetting team-a and east: counts %v, %d states, want %v and 1", got, len(s.m), want)
	}
	if n := testutil.CollectAndCount(s.remote); n != 0 {
		t.Errorf("%d remote series left after its cluster went, want 0", n)
	}
}

// BenchmarkStatesCost reports the Go heap one pair's state costs
// (B/pair), at the bench's 10,000 namespaces: each of 3 sources replicated
// to every namespace.
func BenchmarkStatesCost(b *testing.B) {
	for range b.N {
		targets := make([]string, 10000)
		for i := range targets {
			targets[i] = fmt.Sprintf("ns-%05d", i)
		}
		// The cache interns every namespace's name already (objmeta).
		interned := make([]unique.Handle[string], len(targets))
		for i, ns := range targets {
			interned[i] = unique.Make(ns)
		}
		before := heap.Live()
		s := newStates()
		for _, src := range []string{"shared", "registry", "ca"} {
			for _, ns := range targets {
				s.put(key{Kind: kindSecret, Namespace: "platform", Name: src, Target: ns}, StateInSync)
			}
		}
		after := heap.Live()
		b.ReportMetric(float64(after-before)/float64(len(s.m)), "B/pair")
		runtime.KeepAlive(s)
		runtime.KeepAlive(targets)
		runtime.KeepAlive(interned)
	}
}
