package replicator

import (
	"sync"
	"time"
	"unique"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/courier-k8s/courier/internal/metrics"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// Operations in courier_replicator_writes_total.
const (
	opCreate   = "create"
	opUpdate   = "update"
	opDelete   = "delete"
	opRecreate = "recreate"
)

type replicatorMetrics struct {
	writes, conflicts, reverts, syncErrors, invalidSelectors *prometheus.CounterVec
	invalidAnnotations                                       *prometheus.CounterVec
	latency                                                  *prometheus.HistogramVec
	// Of replicas in other clusters (remote.go), by cluster.
	clusterWrites  *prometheus.CounterVec
	clusterLatency *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer, states *states) *replicatorMetrics {
	const sub = "replicator"
	m := &replicatorMetrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: sub, Name: "writes_total",
			Help: "Replica writes to the API, by kind and operation (create, update, delete, recreate, pull)."}, []string{"kind", "operation"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: sub, Name: "conflicts_total",
			Help: "Times a replica could not be written because an object courier does not own, or an older source's replica, holds the name."}, []string{"kind"}),
		reverts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: sub, Name: "reverts_total",
			Help: "Replicas changed by someone other than courier and reverted to their source."}, []string{"kind"}),
		syncErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: sub, Name: "sync_errors_total",
			Help: "Syncs that failed and were retried with backoff, by kind."}, []string{"kind"}),
		invalidSelectors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: sub, Name: "invalid_selectors_total",
			Help: "Times a source's courier.dev/replicate-to was found not to be a valid selector."}, []string{"kind"}),
		invalidAnnotations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: sub, Name: "invalid_annotations_total",
			Help: "Times a source's courier.dev/replicate-keys, copy-labels or copy-annotations was found invalid, by kind and annotation."}, []string{"kind", "annotation"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: sub, Name: "replication_latency_seconds",
			Help:    "Time from seeing a source change to writing a replica for it.",
			Buckets: latencyBuckets}, []string{"kind"}),
		clusterWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: sub, Name: "cluster_writes_total",
			Help: "Writes of replicas in other clusters (courier.dev/replicate-to-clusters), by cluster (its cluster Secret's name), kind and operation (create, update, delete, recreate)."}, []string{"cluster", "kind", "operation"}),
		clusterLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: sub, Name: "cluster_replication_latency_seconds",
			Help:    "Time from seeing a source change to writing its replica in another cluster, by cluster and kind.",
			Buckets: latencyBuckets}, []string{"cluster", "kind"}),
	}
	states.remote = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: sub, Name: "cluster_replicas",
		Help: "Replicas courier is responsible for in other clusters, by cluster (its cluster Secret's name), kind and state (in_sync, conflict, error, contested); only what there is, on the leader."}, []string{"cluster", "kind", "state"})
	reg.MustRegister(m.writes, m.conflicts, m.reverts, m.syncErrors, m.invalidSelectors, m.invalidAnnotations, m.latency, m.clusterWrites, m.clusterLatency, states.remote, stateCollector{states})
	kinds := []string{kindSecret, kindConfigMap}
	metrics.Zero(m.writes, kinds, []string{opCreate, opUpdate, opDelete, opRecreate, opPull})
	for _, v := range []*prometheus.CounterVec{m.conflicts, m.reverts, m.syncErrors, m.invalidSelectors} {
		metrics.Zero(v, kinds)
	}
	metrics.Zero(m.invalidAnnotations, kinds, []string{wellknown.ReplicateKeys, wellknown.CopyLabels, wellknown.CopyAnnotations})
	metrics.ZeroHistogram(m.latency, kinds)
	return m
}

// zeroCluster gives a usable cluster's write and latency series their 0,
// so the first write there shows as a rate; forgetCluster drops them when
// it goes.
func (m *replicatorMetrics) zeroCluster(cluster string) {
	metrics.Zero(m.clusterWrites, []string{cluster}, []string{kindSecret, kindConfigMap}, []string{opCreate, opUpdate, opDelete, opRecreate})
	metrics.ZeroHistogram(m.clusterLatency, []string{cluster}, []string{kindSecret, kindConfigMap})
}

func (m *replicatorMetrics) forgetCluster(cluster string) {
	m.clusterWrites.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
	m.clusterLatency.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
}

var latencyBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// observeWrite counts a replica write of pair k and its latency since seen
// (zero: unknown).
func (m *replicatorMetrics) observeWrite(k key, op string, took time.Duration, seen bool) {
	if k.Cluster != "" {
		m.clusterWrites.WithLabelValues(k.Cluster, k.Kind, op).Inc()
		if seen {
			m.clusterLatency.WithLabelValues(k.Cluster, k.Kind).Observe(took.Seconds())
		}
		return
	}
	m.writes.WithLabelValues(k.Kind, op).Inc()
	if seen {
		m.latency.WithLabelValues(k.Kind).Observe(took.Seconds())
	}
}

// states is the last outcome of every pair that should hold a replica.
// Those of pairs in other clusters are also counted, as they change, in
// courier_replicator_cluster_replicas (only what there is).
type states struct {
	mu     sync.Mutex
	m      map[pairID]string
	remote *prometheus.GaugeVec // nil until newMetrics
}

// pairID is a key as states holds it: its strings interned (a source's
// kind, namespace and name are shared by all its pairs, a target namespace
// by the pairs of every source), so its key is 48 bytes, not 88: 152 bytes
// a pair in all, not 233 (BenchmarkStatesCost).
type pairID struct {
	kind, namespace, name, target, cluster unique.Handle[string]
	pull                                   bool
}

func idOf(k key) pairID {
	return pairID{unique.Make(k.Kind), unique.Make(k.Namespace), unique.Make(k.Name), unique.Make(k.Target), unique.Make(k.Cluster), k.Pull}
}

func newStates() *states { return &states{m: map[pairID]string{}} }

func (s *states) set(k key, err error) {
	state := StateInSync
	if err != nil && !isQuiet(err) {
		state = StateError
	}
	s.put(k, state)
}

func (s *states) setConflict(k key) { s.put(k, StateConflict) }

func (s *states) put(k key, state string) {
	id := idOf(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count(id, -1)
	s.m[id] = state
	s.count(id, 1)
}

func (s *states) forget(k key) {
	id := idOf(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count(id, -1)
	delete(s.m, id)
}

// count adds d to the count of id's state, if id is in another cluster and
// has one (under mu); a count back at 0 goes.
func (s *states) count(id pairID, d float64) {
	st, ok := s.m[id]
	cluster := id.cluster.Value()
	if cluster == "" || !ok || s.remote == nil {
		return
	}
	g := s.remote.WithLabelValues(cluster, id.kind.Value(), st)
	g.Add(d)
	if m := (&dto.Metric{}); g.Write(m) == nil && m.GetGauge().GetValue() <= 0 {
		s.remote.DeleteLabelValues(cluster, id.kind.Value(), st)
	}
}

// forgetCluster forgets the states of every pair in cluster, which is gone.
func (s *states) forgetCluster(cluster string) {
	c := unique.Make(cluster)
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.m {
		if id.cluster == c {
			s.count(id, -1)
			delete(s.m, id)
		}
	}
}

// reset forgets every state, at the end of a term.
func (s *states) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m = map[pairID]string{} // a new map: Go maps never shrink
	if s.remote != nil {
		s.remote.Reset()
	}
}

// counts are this cluster's states, by kind and state.
func (s *states) counts() map[[2]string]int {
	local := unique.Make("")
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[[2]string]int{}
	for id, st := range s.m {
		if id.cluster == local {
			out[[2]string{id.kind.Value(), st}]++
		}
	}
	return out
}

var replicasDesc = prometheus.NewDesc(metrics.Namespace+"_replicator_replicas",
	"Replicas courier is responsible for, by kind and state (in_sync, conflict, error, contested); 0 on a standby, and dropped at once by a leader that loses its Lease.", []string{"kind", "state"}, nil)

// stateCollector reports states at scrape time, always with every
// kind/state pair so dashboards see zeros rather than gaps.
type stateCollector struct{ s *states }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- replicasDesc }

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.s.counts()
	for _, kind := range []string{kindSecret, kindConfigMap} {
		for _, st := range []string{StateInSync, StateConflict, StateError, StateContested} {
			ch <- prometheus.MustNewConstMetric(replicasDesc, prometheus.GaugeValue, float64(counts[[2]string{kind, st}]), kind, st)
		}
	}
}
