package workers

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/courier-k8s/courier/internal/heap"
	"github.com/courier-k8s/courier/internal/metrics"
)

// waitUntil waits up to 5 s for cond, then fails the test with what.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

func newQueue() *Queue[string] {
	return NewQueue("", workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond), nil, nil)
}

// TestOnlyATermTakesKeys runs two terms on one queue: keys added between
// terms are dropped (a standby keeps no backlog), each term starts from its
// resync, and workers blocked on an empty queue stop when the term ends.
func TestOnlyATermTakesKeys(t *testing.T) {
	q := newQueue()
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
	q := newQueue()
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
	q := newQueue()
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

// An idle queue that took many keys is made anew, and nothing is lost or
// doubled by it: every key added before, during and after is synced, none
// by two workers at once, and a key added after a delay that falls due
// after the renewal still arrives.
func TestAnIdleQueueIsMadeAnewWithoutLosingAKey(t *testing.T) {
	q := newQueue()
	var mu sync.Mutex
	synced, syncing := map[string]int{}, map[string]bool{}
	var overlaps int
	ctx, end := context.WithCancel(context.Background())
	defer end()
	go q.Run(ctx, 8, "wake", func() {}, func(_ context.Context, k string) error {
		mu.Lock()
		if syncing[k] {
			overlaps++
		}
		syncing[k] = true
		mu.Unlock()
		time.Sleep(10 * time.Microsecond)
		mu.Lock()
		syncing[k] = false
		synced[k]++
		mu.Unlock()
		return nil
	}, func(string, error) {})
	waitUntil(t, "the term began", q.Open)
	first := q.current()
	q.AddAfter("late", 300*time.Millisecond, time.Now())
	const n = 3 * renewAfter
	for i := range n {
		q.Add(fmt.Sprint(i), time.Now())
		if i%7 == 0 {
			q.Add(fmt.Sprint(i/2), time.Now()) // again, perhaps while it syncs
		}
	}
	count := func() (all, late int) {
		mu.Lock()
		defer mu.Unlock()
		for i := range n {
			if synced[fmt.Sprint(i)] > 0 {
				all++
			}
		}
		return all, synced["late"]
	}
	waitUntil(t, "every key synced", func() bool { all, _ := count(); return all == n })
	waitUntil(t, "the idle queue made anew", func() bool { return q.current() != first })
	waitUntil(t, "the delayed key synced", func() bool { _, late := count(); return late == 1 })
	second := q.current()
	q.Add("after", time.Now())
	waitUntil(t, "a key added after the renewal synced", func() bool { mu.Lock(); defer mu.Unlock(); return synced["after"] == 1 })
	if q.current() != second {
		t.Error("a queue that took one key since it was made was made anew")
	}
	mu.Lock()
	defer mu.Unlock()
	if overlaps > 0 {
		t.Errorf("%d syncs of a key began while another sync of it ran", overlaps)
	}
	if synced["late"] != 1 {
		t.Errorf("the delayed key synced %d times, want 1", synced["late"])
	}
}

// A key a worker took from a queue just as the queue was made anew (between
// its Get and counting it in flight) does not hold up the new queue until
// its sync is over: it goes to the new queue and is synced there, once.
func TestAKeyTakenAsTheQueueIsMadeAnewDoesNotHoldUpTheNewOne(t *testing.T) {
	q := newQueue()
	taken, release := make(chan struct{}), make(chan struct{})
	q.took = func(k string) {
		if k == "taken" {
			select {
			case <-taken:
				return // taken again, from the new queue
			default:
			}
			close(taken)
			<-release
		}
	}
	var mu sync.Mutex
	synced := map[string]int{}
	unblock := make(chan struct{})
	ctx, end := context.WithCancel(context.Background())
	defer end()
	go q.Run(ctx, 2, "wake", func() {}, func(ctx context.Context, k string) error {
		if k == "taken" {
			select {
			case <-unblock:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		mu.Lock()
		synced[k]++
		mu.Unlock()
		return nil
	}, func(string, error) {})
	waitUntil(t, "the term began", q.Open)
	count := func(k string) int { mu.Lock(); defer mu.Unlock(); return synced[k] }
	first := q.current()
	for i := range renewAfter - 1 {
		q.Add(fmt.Sprint(i), time.Now())
	}
	waitUntil(t, "the first keys synced", func() bool { return count(fmt.Sprint(renewAfter-2)) == 1 && q.Len() == 0 })
	q.Add("taken", time.Now())
	<-taken
	q.Add("other", time.Now()) // the 1025th key: once it is synced, the queue is idle
	waitUntil(t, "the idle queue made anew", func() bool { return q.current() != first })
	close(release)
	q.Add("after", time.Now())
	waitUntil(t, "a key added after the renewal synced while the taken key's sync waits", func() bool { return count("after") == 1 })
	close(unblock)
	waitUntil(t, "the taken key synced", func() bool { return count("taken") == 1 })
	time.Sleep(10 * time.Millisecond)
	if n := count("taken"); n != 1 {
		t.Errorf("the taken key synced %d times, want 1", n)
	}
}

// A key added after a delay while it already waits waits for the earlier
// of the two times only, as client-go's delaying queue has it.
func TestAKeyAddedAfterTwoDelaysWaitsForTheEarlier(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	q := NewQueue("", workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Second), nil, clk)
	synced := make(chan string, 10)
	ctx, end := context.WithCancel(context.Background())
	defer end()
	go q.Run(ctx, 2, "wake", func() {}, func(_ context.Context, k string) error { synced <- k; return nil }, func(string, error) {})
	waitUntil(t, "the term began", q.Open)
	q.AddAfter("k", 2*time.Second, time.Time{})
	q.AddAfter("k", time.Second, time.Time{})
	q.AddAfter("k", 3*time.Second, time.Time{})
	clk.Step(time.Second)
	if k := <-synced; k != "k" {
		t.Fatalf("synced %q", k)
	}
	q.due.mu.Lock()
	defer q.due.mu.Unlock()
	if len(q.due.m) != 0 {
		t.Errorf("due times remembered after the earliest fired: %v", q.due.m)
	}
}

// What client-go's queue kept room for is gone once an idle queue is made
// anew: 100,000 pair keys synced left 35 MB held before (its sets, its
// metrics' map of add times, its queue's array).
func TestAnIdleQueueHoldsNoRoomForItsPeak(t *testing.T) {
	mp := metrics.NewQueues(prometheus.NewRegistry())
	q := NewQueue("pairs", workqueue.NewTypedItemExponentialFailureRateLimiter[pair](time.Millisecond, time.Second), mp, nil)
	keys := pairKeys()
	var done atomic.Int64
	ctx, end := context.WithCancel(context.Background())
	defer end()
	first := q.current()
	before := heap.Live()
	go q.Run(ctx, 4, pair{}, func() {
		for _, k := range keys {
			q.Add(k, time.Now())
		}
	}, func(_ context.Context, k pair) error { q.Take(k); done.Add(1); return nil }, func(pair, error) {})
	for done.Load() < int64(len(keys)) || q.Busy() {
		time.Sleep(time.Millisecond)
	}
	for deadline := time.Now().Add(5 * time.Second); q.current() == first; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the idle queue was never made anew")
		}
	}
	// The old queue goes once its workers stopped and its metrics' ticker
	// (every 500 ms) saw it shut down.
	after := heap.Live()
	for deadline := time.Now().Add(5 * time.Second); after > before+512<<10 && time.Now().Before(deadline); after = heap.Live() {
		time.Sleep(50 * time.Millisecond)
	}
	runtime.KeepAlive(keys)
	t.Logf("heap: %d KiB, after syncing 100,000 keys %d KiB", before>>10, after>>10)
	if grew := int64(after) - int64(before); grew > 512<<10 {
		t.Errorf("an idle queue still holds %d KiB more than before its keys", grew>>10)
	}
}

// A term that ends leaves a new queue behind once its queue took many
// keys: a standby holds no room for the busiest moment of its last term.
func TestATermEndsWithAFreshQueue(t *testing.T) {
	q := newQueue()
	first := q.current()
	ctx, end := context.WithCancel(context.Background())
	done := make(chan struct{})
	release := make(chan struct{})
	go func() {
		q.Run(ctx, 2, "wake", func() {
			for i := range 2 * renewAfter {
				q.Add(fmt.Sprint(i), time.Time{})
			}
		}, func(context.Context, string) error { <-release; return nil }, func(string, error) {})
		close(done)
	}()
	waitUntil(t, "the term began", q.Open)
	end() // keys still wait: no renewal while the term ran
	close(release)
	<-done
	if q.current() == first {
		t.Error("the queue of a term whose queue took 2,048 keys is kept after the term")
	}
	if q.Len() != 0 {
		t.Errorf("%d keys wait after the term", q.Len())
	}
}
