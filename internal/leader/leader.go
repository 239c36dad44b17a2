package leader

import (
	"context"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
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
// (then the lease is released at once). A leader that cannot renew (the API
// server is unreachable for --renew-deadline, say while it restarts) stops
// lead — no write after that — and stands for election again with its caches
// warm; lead must therefore be callable again.
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
		log.Warn("lost the leader lease: stopped writing; standing for election again")
	}
}

// leadOnce waits to win the Lease, runs lead while holding it, and reports
// whether it returned because the Lease was lost (rather than ctx ending).
func leadOnce(ctx context.Context, lock resourcelock.Interface, id string, o config.Options, isLeader prometheus.Gauge, log *zap.Logger, lead func(context.Context) error) (lost bool, err error) {
	// The elector runs on its own context so that on shutdown the lease is
	// released only after the controllers have stopped writing.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	leadCtx, stopLeading := context.WithCancel(ctx)
	defer stopLeading()
	acquired := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.ElectionLease(),
		RenewDeadline:   o.RenewDeadline,
		RetryPeriod:     o.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            wellknown.FieldManager,
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

	select {
	case <-acquired:
	case <-ctx.Done():
		stopElecting()
		<-electorDone
		return false, nil
	}
	leadErr := lead(leadCtx)
	stopElecting() // releases the lease if still held
	<-electorDone
	return ctx.Err() == nil && leadErr == nil, leadErr
}
