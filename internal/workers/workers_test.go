package workers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

func newQueue() workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond))
}

// TestOnlyATermTakesKeys runs two terms on one queue: keys added between
// terms are dropped (a standby keeps no backlog), each term starts from its
// resync, and workers blocked on an empty queue stop when the term ends.
func TestOnlyATermTakesKeys(t *testing.T) {
	q := NewQueue(newQueue())
	var mu sync.Mutex
	synced := map[string]int{}
	count := func(ctx context.Context, k string) error {
		mu.Lock()
		synced[k]++
		mu.Unlock()
		return nil
	}
	waitFor := func(want map[string]int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			ok := fmt.Sprint(synced) == fmt.Sprint(want)
			mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("synced %v, want %v", synced, want)
			}
			time.Sleep(time.Millisecond)
		}
	}

	q.Add("before-any-term", time.Now())
	ctx, end := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		q.Run(ctx, 4, "", func() { q.Add("resync-1", time.Now()) }, count, func(string, error) {})
		close(done)
	}()
	waitFor(map[string]int{"resync-1": 1})
	q.Add("in-term", time.Now())
	waitFor(map[string]int{"resync-1": 1, "in-term": 1})
	end()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("workers did not stop when the term ended")
	}
	q.Add("between-terms", time.Now())
	if q.Len() != 0 {
		t.Fatalf("a closed queue holds %d keys", q.Len())
	}

	ctx, end = context.WithCancel(context.Background())
	defer end()
	go q.Run(ctx, 4, "", func() { q.Add("resync-2", time.Now()) }, count, func(string, error) {})
	waitFor(map[string]int{"resync-1": 1, "in-term": 1, "resync-2": 1})
}

// TestErrorsAreReportedAndRetried: a failing key is reported and retried with backoff.
func TestErrorsAreReportedAndRetried(t *testing.T) {
	q := NewQueue(newQueue())
	var mu sync.Mutex
	attempts, reported := 0, 0
	ctx, end := context.WithCancel(context.Background())
	defer end()
	go q.Run(ctx, 2, "", func() { q.Add("k", time.Time{}) }, func(ctx context.Context, k string) error {
		mu.Lock()
		defer mu.Unlock()
		attempts++
		if attempts < 3 {
			return errors.New("refused")
		}
		return nil
	}, func(string, error) { mu.Lock(); reported++; mu.Unlock() })
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

// TestBusyWhileKeysWaitOrSync: a queue is busy while a key waits or is
// being synced, and idle once every sync returned.
func TestBusyWhileKeysWaitOrSync(t *testing.T) {
	q := NewQueue(newQueue())
	release := make(chan struct{})
	started := make(chan struct{})
	ctx, end := context.WithCancel(context.Background())
	defer end()
	done := make(chan struct{})
	go func() {
		q.Run(ctx, 1, "", func() {}, func(_ context.Context, k string) error {
			if k == "slow" {
				close(started)
				<-release
			}
			return nil
		}, func(string, error) {})
		close(done)
	}()
	for !q.open.Load() {
		time.Sleep(time.Millisecond)
	}
	if q.Busy() {
		t.Fatal("busy before any key")
	}
	q.Add("slow", time.Now())
	<-started
	q.Add("next", time.Now())
	if !q.Busy() {
		t.Fatal("not busy while a key is synced and another waits")
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for q.Busy() {
		if time.Now().After(deadline) {
			t.Fatal("still busy after every sync returned")
		}
		time.Sleep(time.Millisecond)
	}
	end()
	<-done
}
