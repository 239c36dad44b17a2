package leader

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/courier-k8s/courier/internal/config"
)

// lock is a Lease in memory. While held, every call waits for its context
// to end, as calls to an API server that no longer reaches etcd do. It
// notes a call that could still reach the server (its context is live) made
// while lead still runs after a renewal failed: that leader would go on
// writing on a Lease it no longer holds.
type lock struct {
	id      string
	mu      sync.Mutex
	rec     *resourcelock.LeaderElectionRecord
	held    atomic.Bool
	leading atomic.Bool
	failed  atomic.Bool // a call timed out while held
	late    atomic.Int32
}

func (l *lock) call(ctx context.Context) error {
	if l.failed.Load() && l.leading.Load() && ctx.Err() == nil {
		l.late.Add(1)
	}
	if l.held.Load() {
		<-ctx.Done()
		l.failed.Store(true)
		return ctx.Err()
	}
	return nil
}

func (l *lock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	if err := l.call(ctx); err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rec == nil {
		return nil, nil, errNotFound
	}
	r := *l.rec
	return &r, nil, nil
}

func (l *lock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.Update(ctx, r)
}

func (l *lock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	if err := l.call(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rec = &r
	return nil
}

func (l *lock) record() resourcelock.LeaderElectionRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return *l.rec
}

func (l *lock) RecordEvent(string) {}
func (l *lock) Identity() string   { return l.id }
func (l *lock) Describe() string   { return "test/courier" }

var errNotFound = apierrors.NewNotFound(coordinationv1.Resource("leases"), "courier") // client-go then creates

func options() config.Options {
	return config.Options{LeaseDuration: 2 * time.Second, RenewDeadline: 300 * time.Millisecond, RetryPeriod: 50 * time.Millisecond}
}

// TestALeaderThatCannotRenewStopsBeforeItCallsTheAPIServerAgain: a leader
// whose renewal timed out ends lead before anything else, not after
// client-go's attempt to release the Lease (which waits up to
// --renew-deadline more on the same unreachable server: in that time the
// server could come back and take the cut-off leader's writes, made on a
// view of the cluster that stopped when its renewals did).
func TestALeaderThatCannotRenewStopsBeforeItCallsTheAPIServerAgain(t *testing.T) {
	l := &lock{id: "a"}
	lost, err := leadOnce(t.Context(), l, l.id, options(), prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"}), zap.NewNop(), func(ctx context.Context) error {
		l.leading.Store(true)
		l.held.Store(true) // the API server stops answering
		<-ctx.Done()
		l.leading.Store(false)
		return nil
	})
	if err != nil || !lost {
		t.Fatalf("leadOnce = %v, %v; want lost", lost, err)
	}
	if n := l.late.Load(); n > 0 {
		t.Errorf("the Lease was called %d times after a renewal failed while lead still ran", n)
	}
}

// TestShutdownReleasesTheLeaseAfterLeadReturned: on shutdown the Lease is
// given up (a standby takes over at once) only once lead has returned.
func TestShutdownReleasesTheLeaseAfterLeadReturned(t *testing.T) {
	l := &lock{id: "a"}
	ctx, cancel := context.WithCancel(t.Context())
	var leadReturned atomic.Bool
	lost, err := leadOnce(ctx, l, l.id, options(), prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"}), zap.NewNop(), func(ctx context.Context) error {
		cancel()
		<-ctx.Done()
		if r := l.record(); r.HolderIdentity != "a" {
			t.Errorf("the Lease was released before lead returned: %+v", r)
		}
		leadReturned.Store(true)
		return nil
	})
	if err != nil || lost {
		t.Fatalf("leadOnce = %v, %v; want not lost", lost, err)
	}
	if r := l.record(); !leadReturned.Load() || r.HolderIdentity != "" || r.LeaseDurationSeconds != 1 {
		t.Errorf("after shutdown the Lease is %+v; want released (no holder, 1 s)", r)
	}
}

// answering is a Lease whose reads fail with errs, one each, then answer.
type answering struct {
	lock
	mu    sync.Mutex
	errs  []error
	reads int
}

func (a *answering) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reads++
	if len(a.errs) > 0 {
		err := a.errs[0]
		a.errs = a.errs[1:]
		return nil, nil, err
	}
	return &resourcelock.LeaderElectionRecord{HolderIdentity: "a"}, nil, nil
}

// TestALeaderThatLostItsLeaseStandsAgainOnceTheServerAnswers: after a lost
// Lease, courier reads it until the API server answers — refused while a
// restarted server's authorizer is not ready, unavailable, then answered
// (found or not found) — and stands for election then, with client-go's
// first try at once; it stands anyway after the time it was given.
func TestALeaderThatLostItsLeaseStandsAgainOnceTheServerAnswers(t *testing.T) {
	forbidden := apierrors.NewForbidden(coordinationv1.Resource("leases"), "courier", nil)
	unavailable := apierrors.NewServiceUnavailable("starting")
	for _, tc := range []struct {
		name  string
		errs  []error
		reads int
	}{
		{"answered at once", nil, 1},
		{"refused, unavailable, then found", []error{unavailable, forbidden, forbidden}, 4},
		{"refused, then not found", []error{forbidden, errNotFound}, 2},
	} {
		l := &answering{errs: tc.errs}
		untilAnswered(t.Context(), l, time.Minute)
		if l.reads != tc.reads {
			t.Errorf("%s: %d reads, want %d", tc.name, l.reads, tc.reads)
		}
	}
	l := &answering{errs: []error{forbidden, forbidden, forbidden, forbidden, forbidden, forbidden, forbidden, forbidden}}
	untilAnswered(t.Context(), l, 3*answerEvery/2)
	if l.reads < 1 || l.reads > 3 {
		t.Errorf("never answered within 1.5 reads' time: %d reads, want it to stop after 2", l.reads)
	}
}
