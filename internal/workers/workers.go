// Package workers runs a controller's work queue for the terms this process
// leads. A standby holds no backlog: while no term runs, Queue drops every
// key, and each term starts from a resync that enqueues everything the
// controller is responsible for, from the (always warm) informer cache. So a
// takeover, or a term won back after the API server was unreachable, sees
// every change made meanwhile, without restarting the process or rebuilding
// its caches, and without a queue that grows while nobody works on it.
package workers

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// Sync handles one key. It returns the error to retry the key with backoff.
type Sync[K comparable] func(ctx context.Context, k K) error

// Queue is a controller's rate-limited work queue, open only while a term
// runs, with the time each key's change was first seen (see Pending).
type Queue[K comparable] struct {
	q        workqueue.TypedRateLimitingInterface[K]
	pending  *Pending[K]
	open     atomic.Bool
	inFlight atomic.Int64 // keys being synced
}

// NewQueue wraps q, closed until Run starts a term.
func NewQueue[K comparable](q workqueue.TypedRateLimitingInterface[K]) *Queue[K] {
	return &Queue[K]{q: q, pending: NewPending[K]()}
}

// Add queues k, remembering when the change it waits for was seen (the
// earliest, if k already waits; a zero seen records nothing). A closed
// queue drops it: the next term's resync finds the change in the cache.
func (w *Queue[K]) Add(k K, seen time.Time) {
	if !w.open.Load() {
		return
	}
	w.pending.Remember(k, seen)
	w.q.Add(k)
}

// AddAfter is Add after delay.
func (w *Queue[K]) AddAfter(k K, delay time.Duration, seen time.Time) {
	if !w.open.Load() {
		return
	}
	w.pending.Remember(k, seen)
	w.q.AddAfter(k, delay)
}

// Open reports whether the queue takes keys: this process leads.
func (w *Queue[K]) Open() bool { return w.open.Load() }

// Take ends k's wait and returns when its change was first seen.
func (w *Queue[K]) Take(k K) (time.Time, bool) { return w.pending.Take(k) }

// NumRequeues is how many times k failed in a row.
func (w *Queue[K]) NumRequeues(k K) int { return w.q.NumRequeues(k) }

// Len is how many keys wait.
func (w *Queue[K]) Len() int { return w.q.Len() }

// Busy reports whether keys wait or are being synced (keys added after a
// delay count once their delay is over).
func (w *Queue[K]) Busy() bool { return w.q.Len() > 0 || w.inFlight.Load() > 0 }

// Run is one term: it opens the queue, calls resync to enqueue everything
// (through Add), runs n workers until ctx ends, waits for them, then closes
// and empties the queue. wake must be a key no one ever adds: Run puts it on
// the queue to wake workers blocked waiting for a key so they see that the
// term is over. onError is told about every failed sync (not those cut short
// by the end of the term).
func (w *Queue[K]) Run(ctx context.Context, n int, wake K, resync func(), syncKey Sync[K], onError func(K, error)) {
	w.open.Store(true)
	resync()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for w.process(ctx, wake, syncKey, onError) {
			}
		})
	}
	<-ctx.Done()
	w.open.Store(false)
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	for done := false; !done; {
		w.q.Add(wake)
		select {
		case <-stopped:
			done = true
		case <-time.After(5 * time.Millisecond):
		}
	}
	w.drain()
}

// drain empties the queue and the pending times. Keys added after a delay
// may still arrive; they wait for the next term, which syncs them anyway.
func (w *Queue[K]) drain() {
	for w.q.Len() > 0 {
		k, shutdown := w.q.Get()
		if shutdown {
			return
		}
		w.q.Forget(k)
		w.q.Done(k)
		w.pending.Take(k)
	}
}

// process handles one key and reports whether the worker goes on.
func (w *Queue[K]) process(ctx context.Context, wake K, syncKey Sync[K], onError func(K, error)) bool {
	k, shutdown := w.q.Get()
	if shutdown {
		return false
	}
	defer w.q.Done(k)
	if k == wake || ctx.Err() != nil {
		return ctx.Err() == nil
	}
	w.inFlight.Add(1)
	err := syncKey(ctx, k)
	w.inFlight.Add(-1)
	switch {
	case err == nil:
		w.q.Forget(k)
	case ctx.Err() != nil:
		return false // cut short by the end of the term: the next term's resync syncs it
	default:
		onError(k, err)
		w.q.AddRateLimited(k)
	}
	return true
}

// Remember records seen for k (a failed sync's retry still measures from the
// change it waits for), while a term runs.
func (w *Queue[K]) Remember(k K, seen time.Time) {
	if w.open.Load() {
		w.pending.Remember(k, seen)
	}
}
