package reloader

import (
	"sync"
	"time"
)

// expiring is per-process state with one lifetime rule: an entry lives until
// it is deleted (its object went, or what it records was taken in) or until
// ttl after it was last set, whichever comes first. A Get past the ttl finds
// nothing; a Set sweeps every expired entry, at most once per ttl, so what
// nobody deletes (a standby, which syncs nothing) is still dropped.
type expiring[K comparable, V any] struct {
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	m     map[K]stamped[V]
	swept time.Time
}

type stamped[V any] struct {
	v  V
	at time.Time
}

func newExpiring[K comparable, V any](ttl time.Duration, now func() time.Time) *expiring[K, V] {
	return &expiring[K, V]{ttl: ttl, now: now, m: map[K]stamped[V]{}}
}

// Set records v for k now; next, if given, makes v from what k holds (ok
// false when nothing, or only an expired entry).
func (e *expiring[K, V]) Set(k K, next func(old V, ok bool) V) {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if now.Sub(e.swept) > e.ttl {
		e.swept = now
		for key, s := range e.m {
			if now.Sub(s.at) > e.ttl {
				delete(e.m, key)
			}
		}
	}
	old, ok := e.m[k]
	ok = ok && now.Sub(old.at) <= e.ttl
	e.m[k] = stamped[V]{v: next(old.v, ok), at: now}
}

// Get is what k holds, and when it was set, unless it expired.
func (e *expiring[K, V]) Get(k K) (V, time.Time, bool) {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.m[k]
	if !ok || now.Sub(s.at) > e.ttl {
		var zero V
		return zero, time.Time{}, false
	}
	return s.v, s.at, true
}

// Update changes what k holds, if it holds a live entry, keeping when it
// was set.
func (e *expiring[K, V]) Update(k K, change func(V) V) {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if s, ok := e.m[k]; ok && now.Sub(s.at) <= e.ttl {
		e.m[k] = stamped[V]{v: change(s.v), at: s.at}
	}
}

// Delete drops k.
func (e *expiring[K, V]) Delete(k K) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, k)
}

// Len is how many entries are held, expired ones not swept yet included.
func (e *expiring[K, V]) Len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.m)
}
