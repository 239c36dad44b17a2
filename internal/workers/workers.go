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
	"k8s.io/utils/clock"
)

// Sync handles one key. It returns the error to retry the key with backoff.
type Sync[K comparable] func(ctx context.Context, k K) error

// renewAfter is how many keys a client-go queue takes before it is made
// anew the next time it is idle. Its sets, and its metrics' map of when
// each key was added, are Go maps, which keep the room they once needed: a
// start puts every replica pair and workload in them, a source update every
// replica of the source, and an idle courier kept room for all of them (14
// MB at 10,000 namespaces).
const renewAfter = 1024

// Queue is a controller's rate-limited work queue, open only while a term
// runs, with the time each key's change was first seen (see Pending).
//
// The keys wait in a client-go queue, which is made anew when it is idle
// after taking more than renewAfter keys: the workers of the old one finish
// first, so no key is ever synced by two workers at once, and none of them
// is syncing then (a key one took as the queue was made anew goes to the
// new queue), so the new one's workers start at once. Keys added after
// a delay (AddAfter, retries) wait in a timer of courier's, not in the
// client-go queue, so none is lost with an old queue; as client-go's
// delaying queue does, a key waits for its earliest due time only.
type Queue[K comparable] struct {
	name    string
	limiter workqueue.TypedRateLimiter[K]
	metrics workqueue.MetricsProvider
	clock   clock.WithTicker
	retries workqueue.CounterMetric

	mu    sync.RWMutex // read to use q, written to make it anew
	q     workqueue.TypedInterface[K]
	added atomic.Int64 // keys q took since it was made

	pending  *Pending[K] // when each key's change was first seen
	due      *Pending[K] // when each key added after a delay is due
	idle     chan struct{}
	open     atomic.Bool
	inFlight atomic.Int64 // keys taken from a client-go queue and not yet done

	took func(K) // tests: called between a worker's Get and count
}

// NewQueue is a queue named name (its metrics' name label), whose failed
// keys are retried after limiter's delay, closed until Run starts a term.
func NewQueue[K comparable](name string, limiter workqueue.TypedRateLimiter[K], metrics workqueue.MetricsProvider, clk clock.WithTicker) *Queue[K] {
	if clk == nil {
		clk = clock.RealClock{}
	}
	w := &Queue[K]{name: name, limiter: limiter, metrics: metrics, clock: clk,
		pending: NewPending[K](), due: NewPending[K](), idle: make(chan struct{}, 1)}
	if metrics != nil {
		w.retries = metrics.NewRetriesMetric(name)
	}
	w.q = w.newClientQueue()
	return w
}

func (w *Queue[K]) newClientQueue() workqueue.TypedInterface[K] {
	return workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[K]{Name: w.name, MetricsProvider: w.metrics, Clock: w.clock})
}

// current is the client-go queue keys go to now.
func (w *Queue[K]) current() workqueue.TypedInterface[K] {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.q
}

// Add queues k, remembering when the change it waits for was seen (the
// earliest, if k already waits; a zero seen records nothing). A closed
// queue drops it: the next term's resync finds the change in the cache.
func (w *Queue[K]) Add(k K, seen time.Time) {
	if !w.open.Load() {
		return
	}
	w.pending.Remember(k, seen)
	w.add(k)
}

func (w *Queue[K]) add(k K) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	w.q.Add(k)
	w.added.Add(1)
}

// AddAfter is Add after delay. A key already waiting for an earlier time
// waits for that one only.
func (w *Queue[K]) AddAfter(k K, delay time.Duration, seen time.Time) {
	if !w.open.Load() {
		return
	}
	w.pending.Remember(k, seen)
	w.after(k, delay)
}

func (w *Queue[K]) after(k K, delay time.Duration) {
	if delay <= 0 {
		w.add(k)
		return
	}
	due := w.clock.Now().Add(delay)
	if !w.due.Sooner(k, due) {
		return
	}
	fire := func() {
		if w.due.TakeAt(k, due) && w.open.Load() {
			w.add(k)
		}
	}
	if c, ok := w.clock.(clock.WithDelayedExecution); ok {
		c.AfterFunc(delay, fire)
		return
	}
	t := w.clock.NewTimer(delay)
	go func() { <-t.C(); fire() }()
}

// Open reports whether the queue takes keys: this process leads.
func (w *Queue[K]) Open() bool { return w.open.Load() }

// Take ends k's wait and returns when its change was first seen.
func (w *Queue[K]) Take(k K) (time.Time, bool) { return w.pending.Take(k) }

// NumRequeues is how many times k failed in a row.
func (w *Queue[K]) NumRequeues(k K) int { return w.limiter.NumRequeues(k) }

// Len is how many keys wait (not those added after a delay still to come).
func (w *Queue[K]) Len() int { return w.current().Len() }

// Busy reports whether keys wait or are being synced (keys added after a
// delay count once their delay is over).
func (w *Queue[K]) Busy() bool { return w.Len() > 0 || w.inFlight.Load() > 0 }

// Run is one term: it opens the queue, calls resync to enqueue everything
// (through Add), runs n workers until ctx ends, waits for them, then closes
// and empties the queue. wake must be a key no one ever adds: Run puts it on
// the queue to wake workers blocked waiting for a key so they see that the
// term is over. onError is told about every failed sync (not those cut short
// by the end of the term).
func (w *Queue[K]) Run(ctx context.Context, n int, wake K, resync func(), syncKey Sync[K], onError func(K, error)) {
	w.open.Store(true)
	resync()
	start := func() *sync.WaitGroup {
		q := w.current()
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				for w.process(ctx, q, wake, syncKey, onError) {
				}
			})
		}
		return &wg
	}
	wg := start()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-w.idle:
			if old := w.renew(); old != nil {
				old.ShutDown() // its workers finish what it holds, then stop
				wg.Wait()
				w.drain(old) // what they left if the term ended meanwhile
				wg = start()
			}
		}
	}
	w.open.Store(false)
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	for done := false; !done; {
		w.add(wake)
		select {
		case <-stopped:
			done = true
		case <-time.After(5 * time.Millisecond):
		}
	}
	w.drain(w.current())
	if old := w.renew(); old != nil { // a standby keeps no room either
		old.ShutDown()
	}
}

// renew makes the client-go queue anew if it is idle and took more than
// renewAfter keys, and returns the old one (nil if it did not). Keys added
// from now on go to the new one.
func (w *Queue[K]) renew() workqueue.TypedInterface[K] {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.q.Len() > 0 || w.inFlight.Load() > 0 || w.added.Load() <= renewAfter {
		return nil
	}
	old := w.q
	w.q = w.newClientQueue()
	w.added.Store(0)
	return old
}

// drain empties q and the pending times of its keys. Keys added after a
// delay that fall due while the queue is closed are dropped, as every other
// key then: the next term's resync syncs them anyway.
func (w *Queue[K]) drain(q workqueue.TypedInterface[K]) {
	for q.Len() > 0 {
		k, shutdown := q.Get()
		if shutdown {
			return
		}
		w.limiter.Forget(k)
		q.Done(k)
		w.pending.Take(k)
	}
}

// count counts a key taken from q in flight, unless q is no longer the
// current queue: under the lock renew takes, so a queue is made anew only
// when no key taken from it is still to be synced there.
func (w *Queue[K]) count(q workqueue.TypedInterface[K]) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if q != w.q {
		return false
	}
	w.inFlight.Add(1)
	return true
}

// process handles one key of q and reports whether the worker goes on.
func (w *Queue[K]) process(ctx context.Context, q workqueue.TypedInterface[K], wake K, syncKey Sync[K], onError func(K, error)) bool {
	k, shutdown := q.Get()
	if shutdown {
		return false
	}
	if w.took != nil {
		w.took(k)
	}
	if !w.count(q) {
		// q was made anew between Get and now, and its workers are told to
		// finish: k goes to the new queue, whose workers sync it once these
		// stopped, instead of holding them up until it is synced here.
		q.Done(k)
		if k != wake {
			w.add(k)
		}
		return true
	}
	defer func() {
		q.Done(k) // which puts k back if it was added while it synced
		w.inFlight.Add(-1)
		if q.Len() == 0 && w.added.Load() > renewAfter {
			select {
			case w.idle <- struct{}{}:
			default:
			}
		}
	}()
	if k == wake || ctx.Err() != nil {
		return ctx.Err() == nil
	}
	err := syncKey(ctx, k)
	switch {
	case err == nil:
		w.limiter.Forget(k)
	case ctx.Err() != nil:
		return false // cut short by the end of the term: the next term's resync syncs it
	default:
		onError(k, err)
		if w.retries != nil {
			w.retries.Inc()
		}
		w.after(k, w.limiter.When(k))
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
