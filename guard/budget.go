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

	mu       sync.Mutex
	replicas map[string]*history
}

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
		replicas: map[string]*history{},
	}
	reg.MustRegister(b.contested)
	metrics.Zero(b.contested, []string{wellknown.KindSecret, wellknown.KindConfigMap})
	return b
}

// Allow is asked before reverting replica (any stable identifier). It
// returns 0 when the revert may go ahead; otherwise how long to wait, and
// whether this call started a new backoff (the moment to tell the user with
// a ReplicaContested event). Only reverts that were written count: call
// Reverted after each.
func (b *Budget) Allow(kind, replica string) (wait time.Duration, newlyContested bool) {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.history(replica, now)
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
func (b *Budget) Reverted(replica string) {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.history(replica, now)
	h.reverts = append(h.recent(now), now)
}

// history returns replica's history, new if it was quiet for ResetAfter.
func (b *Budget) history(replica string, now time.Time) *history {
	h := b.replicas[replica]
	if h == nil || now.Sub(h.lastSeen) > ResetAfter {
		h = &history{}
		b.replicas[replica] = h
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

// Forget drops a replica's history (it was deleted).
func (b *Budget) Forget(replica string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.replicas, replica)
}
