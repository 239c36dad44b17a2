package guard

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/courier-k8s/courier/internal/metrics"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// The revert policy: up to RevertsPerWindow reverts of one replica within
// Window; past that, courier stops reverting for a backoff that starts at
// FirstBackoff and doubles with each further contest, up to MaxBackoff. A
// replica left alone for ResetAfter starts again from the first backoff.
const (
	RevertsPerWindow = 5
	Window           = time.Minute
	FirstBackoff     = 10 * time.Second
	MaxBackoff       = 5 * time.Minute
	ResetAfter       = 10 * time.Minute
)

// Budget decides, per replica, whether courier may revert it now.
type Budget struct {
	clock     clock.PassiveClock
	contested *prometheus.CounterVec

	mu        sync.Mutex
	replicas  map[replicaKey]*history
	lastSweep time.Time
}

// replicaKey names one replica: a Secret and a ConfigMap of one name in one
// namespace are two replicas, each with its own budget.
type replicaKey struct{ kind, replica string }

type history struct {
	reverts  []time.Time // within Window
	backoff  time.Duration
	until    time.Time
	lastSeen time.Time
}

// NewBudget registers courier_guard_replicas_contested_total on reg; clk is
// the budget's time.
func NewBudget(reg prometheus.Registerer, clk clock.PassiveClock) *Budget {
	b := &Budget{
		clock: clk,
		contested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: "guard", Name: "replicas_contested_total",
			Help: "Times courier stopped reverting a replica that another writer kept changing, by kind.",
		}, []string{"kind"}),
		replicas: map[replicaKey]*history{},
	}
	reg.MustRegister(b.contested)
	metrics.Zero(b.contested, []string{wellknown.KindSecret, wellknown.KindConfigMap})
	return b
}

// Allow is asked before reverting replica (kind and any stable identifier). It
// returns 0 when the revert may go ahead; otherwise how long to wait, and
// whether this call started a new backoff (the moment to tell the user with
// a ReplicaContested event). Only reverts that were written count: call
// Reverted after each.
func (b *Budget) Allow(kind, replica string) (wait time.Duration, newlyContested bool) {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.history(replicaKey{kind, replica}, now)
	if now.Before(h.until) {
		return h.until.Sub(now), false
	}
	if len(h.recent(now)) < RevertsPerWindow {
		return 0, false
	}
	if h.backoff == 0 {
		h.backoff = FirstBackoff
	} else {
		h.backoff = min(2*h.backoff, MaxBackoff)
	}
	h.until = now.Add(h.backoff)
	h.reverts = h.reverts[:0]
	b.contested.WithLabelValues(kind).Inc()
	return h.backoff, true
}

// Reverted records a revert of replica that was written.
func (b *Budget) Reverted(kind, replica string) {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.history(replicaKey{kind, replica}, now)
	h.reverts = append(h.recent(now), now)
}

// history returns replica's history, new if it was quiet for ResetAfter.
// Once a Window it forgets every replica quiet for that long, so the budget
// holds only replicas reverted in the last ResetAfter.
func (b *Budget) history(k replicaKey, now time.Time) *history {
	if now.Sub(b.lastSweep) > Window {
		b.lastSweep = now
		for k, h := range b.replicas {
			if now.Sub(h.lastSeen) > ResetAfter {
				delete(b.replicas, k)
			}
		}
	}
	h := b.replicas[k]
	if h == nil || now.Sub(h.lastSeen) > ResetAfter {
		h = &history{}
		b.replicas[k] = h
	}
	h.lastSeen = now
	return h
}

// recent drops reverts older than Window and returns the rest.
func (h *history) recent(now time.Time) []time.Time {
	kept := h.reverts[:0]
	for _, t := range h.reverts {
		if now.Sub(t) < Window {
			kept = append(kept, t)
		}
	}
	h.reverts = kept
	return kept
}

// Forget drops a replica's history: it is gone, or no longer wanted.
func (b *Budget) Forget(kind, replica string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.replicas, replicaKey{kind, replica})
}

// Len is how many replicas the budget holds a history for.
func (b *Budget) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.replicas)
}
