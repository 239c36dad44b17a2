package workers

import (
	"sync"
	"time"

	"github.com/courier-k8s/courier/internal/room"
)

// Pending remembers, per work-queue key, the earliest of the times it was
// given: when the change the key waits for was first seen, so a controller
// can measure change-seen → written latency across retries and coalesced
// events; and in a Queue, when a key added after a delay is due. It is safe
// for concurrent use; the zero value is not usable: use NewPending.
//
// A start or a source update puts every replica's key here at once: the
// map is made anew once little of them is left (room.Kept), so an idle
// courier holds no room for its busiest moment.
type Pending[K comparable] struct {
	mu   sync.Mutex
	m    map[K]time.Time
	peak int // the most keys m held since it was made
}

// NewPending returns an empty Pending.
func NewPending[K comparable]() *Pending[K] { return &Pending[K]{m: map[K]time.Time{}} }

// Remember records seen for k, keeping the earliest time if k already waits.
// A zero seen (no known change) is ignored.
func (p *Pending[K]) Remember(k K, seen time.Time) {
	if !seen.IsZero() {
		p.Sooner(k, seen)
	}
}

// Sooner records t for k if k has no time or a later one, and reports
// whether it did.
func (p *Pending[K]) Sooner(k K, t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.m[k]; ok && !t.Before(old) {
		return false
	}
	p.m[k] = t
	p.peak = max(p.peak, len(p.m))
	return true
}

// TakeAt ends k's wait if its time is t, and reports whether it did.
func (p *Pending[K]) TakeAt(k K, t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.m[k]; !ok || !old.Equal(t) {
		return false
	}
	p.delete(k)
	return true
}

// Take ends k's wait and returns when its change was seen.
func (p *Pending[K]) Take(k K) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.m[k]
	p.delete(k)
	return t, ok
}

func (p *Pending[K]) delete(k K) {
	delete(p.m, k)
	p.m = room.Kept(p.m, &p.peak)
}
