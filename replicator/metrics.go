package replicator

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

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
}

func newMetrics(reg prometheus.Registerer, states *states) *replicatorMetrics {
	const sub = "replicator"
	m := &replicatorMetrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: sub, Name: "writes_total",
			Help: "Replica writes to the API, by kind, operation (create, update, delete, recreate, pull) and cluster (\"\": this one; else the cluster Secret's name)."}, []string{"kind", "operation", "cluster"}),
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
			Help:    "Time from seeing a source change to writing a replica for it, by kind and cluster (\"\": this one).",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}}, []string{"kind", "cluster"}),
	}
	reg.MustRegister(m.writes, m.conflicts, m.reverts, m.syncErrors, m.invalidSelectors, m.invalidAnnotations, m.latency, stateCollector{states})
	kinds := []string{kindSecret, kindConfigMap}
	metrics.Zero(m.writes, kinds, []string{opCreate, opUpdate, opDelete, opRecreate, opPull}, []string{""})
	for _, v := range []*prometheus.CounterVec{m.conflicts, m.reverts, m.syncErrors, m.invalidSelectors} {
		metrics.Zero(v, kinds)
	}
	metrics.Zero(m.invalidAnnotations, kinds, []string{wellknown.ReplicateKeys, wellknown.CopyLabels, wellknown.CopyAnnotations})
	metrics.ZeroHistogram(m.latency, kinds, []string{""})
	return m
}

// states is the last outcome of every pair that should hold a replica.
type states struct {
	mu sync.Mutex
	m  map[key]string
}

func (s *states) set(k key, err error) {
	state := StateInSync
	if err != nil && !isQuiet(err) {
		state = StateError
	}
	s.put(k, state)
}

func (s *states) setConflict(k key) { s.put(k, StateConflict) }

func (s *states) put(k key, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = state
}

func (s *states) forget(k key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
}

// reset forgets every state, at the end of a term.
func (s *states) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m = map[key]string{} // a new map: Go maps never shrink
}

func (s *states) counts() map[[3]string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[[3]string]int{}
	for k, st := range s.m {
		out[[3]string{k.Kind, st, k.Cluster}]++
	}
	return out
}

var replicasDesc = prometheus.NewDesc(metrics.Namespace+"_replicator_replicas",
	"Replicas courier is responsible for, by kind, state (in_sync, conflict, error, contested) and cluster (\"\": this one; else the cluster Secret's name); 0 on a standby, and dropped at once by a leader that loses its Lease.", []string{"kind", "state", "cluster"}, nil)

// stateCollector reports states at scrape time, always with every
// kind/state pair so dashboards see zeros rather than gaps.
type stateCollector struct{ s *states }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- replicasDesc }

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.s.counts()
	for _, kind := range []string{kindSecret, kindConfigMap} {
		for _, st := range []string{StateInSync, StateConflict, StateError, StateContested} {
			k := [3]string{kind, st, ""}
			ch <- prometheus.MustNewConstMetric(replicasDesc, prometheus.GaugeValue, float64(counts[k]), kind, st, "")
			delete(counts, k)
		}
	}
	for k, n := range counts { // other clusters': only what is there
		ch <- prometheus.MustNewConstMetric(replicasDesc, prometheus.GaugeValue, float64(n), k[0], k[1], k[2])
	}
}
