package workers

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

func newQueue() workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond))
}

// TestTermsShareOneQueue runs two terms on one queue: a key cut short by
// the end of the first term, and keys added between terms, are synced in the
// second; workers blocked on an empty queue stop when the term ends.
func TestTermsShareOneQueue(t *testing.T) {
	q := newQueue()
	defer q.ShutDown()
	var mu sync.Mutex
	synced := map[string]int{}
	inFlight := make(chan struct{})
	syncKey := func(ctx context.Context, k string) error {
		if k == "slow" {
			close(inFlight)
			<-ctx.Done() // the term ends mid-sync, as an API call would be cancelled
			return ctx.Err()
		}
		mu.Lock()
		synced[k]++
		mu.Unlock()
		return nil
	}

	ctx, end := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Run(ctx, q, 4, "", syncKey, func(string, error) {}); close(done) }()
	q.Add("slow")
	<-inFlight
	end()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("workers did not stop when the term ended")
	}
	q.Add("between-terms")

	ctx, end = context.WithCancel(context.Background())
	defer end()
	go Run(ctx, q, 4, "", func(ctx context.Context, k string) error {
		mu.Lock()
		synced[k]++
		mu.Unlock()
		return nil
	}, func(string, error) {})
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		ok := synced["slow"] == 1 && synced["between-terms"] == 1
		mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("second term synced %v, want slow and between-terms once each", synced)
		}
		time.Sleep(time.Millisecond)
	}
	if synced[""] != 0 {
		t.Error("the wake key was synced as a real key")
	}
}

// TestErrorsAreReportedAndRetried: a failing key is reported and retried with backoff.
func TestErrorsAreReportedAndRetried(t *testing.T) {
	q := newQueue()
	defer q.ShutDown()
	var mu sync.Mutex
	attempts, reported := 0, 0
	ctx, end := context.WithCancel(context.Background())
	defer end()
	go Run(ctx, q, 2, "", func(ctx context.Context, k string) error {
		mu.Lock()
		defer mu.Unlock()
		attempts++
		if attempts < 3 {
			return errors.New("refused")
		}
		return nil
	}, func(string, error) { mu.Lock(); reported++; mu.Unlock() })
	q.Add("k")
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		a, r := attempts, reported
		mu.Unlock()
		if a == 3 && r == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("attempts %d, reported %d; want 3 and 2", a, r)
		}
		time.Sleep(time.Millisecond)
	}
}
