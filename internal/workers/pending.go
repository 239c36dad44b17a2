package workers

import (
	"sync"
	"time"
)

// Pending remembers, per work-queue key, when the change the key waits for
// was first seen, so a controller can measure change-seen → written latency
// across retries and coalesced events. It is safe for concurrent use; the
// zero value is not usable: use NewPending.
//
// A Go map keeps the room it once needed after its keys are deleted, and a
// start or a source update puts every replica's key here at once: once
// empty after holding more than shrinkAbove keys, the map is made anew, so
// an idle courier holds no room for its busiest moment.
type Pending[K comparable] struct {
	mu   sync.Mutex
	m    map[K]time.Time
	peak int // the most keys m held since it was made
}

// shrinkAbove is the size past which an emptied map is made anew.
const shrinkAbove = 1024

// NewPending returns an empty Pending.
func NewPending[K comparable]() *Pending[K] { return &Pending[K]{m: map[K]time.Time{}} }

// Remember records seen for k, keeping the earliest time if k already waits.
// A zero seen (no known change) is ignored.
func (p *Pending[K]) Remember(k K, seen time.Time) {
	if seen.IsZero() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.m[k]; !ok || seen.Before(t) {
		p.m[k] = seen
		p.peak = max(p.peak, len(p.m))
	}
}

// Take ends k's wait and returns when its change was seen.
func (p *Pending[K]) Take(k K) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.m[k]
	delete(p.m, k)
	if len(p.m) == 0 && p.peak > shrinkAbove {
		p.m, p.peak = map[K]time.Time{}, 0
	}
	return t, ok
}
