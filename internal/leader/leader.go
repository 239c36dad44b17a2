package leader

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/courier-k8s/courier/internal/config"
	"github.com/courier-k8s/courier/internal/metrics"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// NewGauge is courier_leader_is_leader, for Run to set. main registers it
// once the caches synced, so a process still syncing reports no leadership
// either way (and CourierNoLeader does not count it).
func NewGauge() prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: "leader", Name: "is_leader",
		Help: "Present once this process's caches synced: 1 while it leads (holds the leader lease, or runs with --leader-elect=false), else 0.",
	})
}

// LeaseName is the Lease in --namespace that courier processes elect on.
const LeaseName = "courier"

// Run runs lead while this process holds the Lease, until ctx ends
// (then, once lead returned, the lease is released at once). A leader that
// cannot renew (the API server is unreachable for --renew-deadline, say
// while it restarts) stops lead at once — no write after that, and no
// attempt to release a Lease it may no longer hold — and stands for
// election again with its caches warm; lead must therefore be callable
// again.
// isLeader is courier_leader_is_leader (see Gauge).
func Run(ctx context.Context, client kubernetes.Interface, o config.Options, isLeader prometheus.Gauge, logger *zap.Logger, lead func(context.Context) error) error {
	host, _ := os.Hostname()
	id := host + "_" + rand.String(8)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.Namespace, Name: LeaseName},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	log := logger.Named("leader").With(zap.String("identity", id), zap.String("lease", o.Namespace+"/"+LeaseName))
	for {
		lost, err := leadOnce(ctx, lock, id, o, isLeader, log, lead)
		if err != nil || !lost {
			return err
		}
		log.Warn("lost the leader lease: stopped writing; standing for election again once the API server answers")
		untilAnswered(ctx, lock, o.LeaseDuration)
	}
}

// answerEvery is how often a leader that lost its Lease asks for it, until
// the API server answers.
const answerEvery = 250 * time.Millisecond

// untilAnswered returns once the API server answers a read of the Lease
// (found or not), or after within, or when ctx ends. A leader loses its
// Lease when the API server cannot be reached for --renew-deadline, as while
// kube-apiserver restarts; client-go's elector then tries again every 1 to
// 2.2 retry periods, so its first try after the server is back came up to
// 2.2 s late. Its first try is at once: it starts once the server answers.
func untilAnswered(ctx context.Context, lock resourcelock.Interface, within time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	_ = wait.PollUntilContextCancel(ctx, answerEvery, true, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 4*answerEvery) // a server starting may hold a request
		defer cancel()
		_, _, err := lock.Get(ctx)
		return err == nil || apierrors.IsNotFound(err), nil
	})
}

// leadOnce waits to win the Lease, runs lead while holding it, and reports
// whether it returned because the Lease was lost (rather than ctx ending).
func leadOnce(ctx context.Context, lock resourcelock.Interface, id string, o config.Options, isLeader prometheus.Gauge, log *zap.Logger, lead func(context.Context) error) (lost bool, err error) {
	// The elector runs on its own context so that on shutdown the lease is
	// released only after the controllers have stopped writing. It does not
	// release the Lease itself (ReleaseOnCancel): it would do so also after
	// a failed renewal, before Run returns — up to --renew-deadline more of
	// writing on a view of the cluster that stopped with the renewals.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	leadCtx, stopLeading := context.WithCancel(ctx)
	defer stopLeading()
	acquired := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: o.ElectionLease(),
		RenewDeadline: o.RenewDeadline,
		RetryPeriod:   o.RetryPeriod,
		Name:          wellknown.FieldManager,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				log.Info("became leader")
				isLeader.Set(1)
				close(acquired)
			},
			OnStoppedLeading: func() {
				isLeader.Set(0)
				log.Info("stopped leading")
			},
			OnNewLeader: func(current string) {
				if current != id {
					log.Info("standing by", zap.String("leader", current))
				}
			},
		},
	})
	if err != nil {
		return false, fmt.Errorf("leader election: %w", err)
	}
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		defer stopLeading() // le.Run returns once leadership is lost
		le.Run(electCtx)
	}()

	var leadErr error
	select {
	case <-acquired:
		leadErr = lead(leadCtx)
	case <-ctx.Done():
	}
	stopElecting()
	<-electorDone
	if lost = ctx.Err() == nil && leadErr == nil; !lost && le.IsLeader() {
		release(lock, id, o.RenewDeadline, log)
	}
	return lost, leadErr
}

// release gives up the Lease if this process still holds it, so that a
// standby takes over at once rather than after --lease-duration.
func release(lock resourcelock.Interface, id string, timeout time.Duration, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rec, _, err := lock.Get(ctx)
	if err == nil && rec.HolderIdentity == id {
		now := metav1.NewTime(time.Now())
		err = lock.Update(ctx, resourcelock.LeaderElectionRecord{LeaderTransitions: rec.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now})
	}
	if err != nil {
		log.Warn("could not release the leader lease: a standby takes over once it expires", zap.Error(err))
	}
}
