// Package workers runs a controller's workers on its work queue for one
// leadership term. Unlike the usual pattern it never shuts the queue down:
// when the term ends the workers stop, the queue keeps collecting keys from
// the informers, and the next term (after the lease is won back, say once
// the API server is reachable again) works on the same queue — without
// restarting the process or rebuilding its caches.
package workers

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// Sync handles one key. It returns the error to retry the key with backoff;
// a key whose sync was cut short because ctx ended is kept for the next term.
type Sync[K comparable] func(ctx context.Context, k K) error

// Run runs n workers on q until ctx ends, then waits for them. wake must be a
// key no informer ever adds: Run puts it on the queue to wake workers blocked
// waiting for a key so they see that the term is over. onError is told about
// every failed sync (not those cut short by the end of the term).
func Run[K comparable](ctx context.Context, q workqueue.TypedRateLimitingInterface[K], n int, wake K, syncKey Sync[K], onError func(K, error)) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for process(ctx, q, wake, syncKey, onError) {
			}
		})
	}
	<-ctx.Done()
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	for {
		q.Add(wake)
		select {
		case <-stopped:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// process handles one key and reports whether the worker goes on.
func process[K comparable](ctx context.Context, q workqueue.TypedRateLimitingInterface[K], wake K, syncKey Sync[K], onError func(K, error)) bool {
	k, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(k)
	if k == wake {
		return ctx.Err() == nil
	}
	if ctx.Err() != nil {
		q.Add(k) // the term ended while k waited: the next term syncs it
		return false
	}
	err := syncKey(ctx, k)
	switch {
	case err == nil:
		q.Forget(k)
	case ctx.Err() != nil:
		q.Add(k) // cut short by the end of the term: keep it for the next
		return false
	default:
		onError(k, err)
		q.AddRateLimited(k)
	}
	return true
}
