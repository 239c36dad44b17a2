package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/courier-k8s/courier/keys"
	"github.com/courier-k8s/courier/metrics"
)

// leaseName is the Lease in --namespace that courier processes elect on.
const leaseName = "courier"

// errLostLease ends the process: a leader that can no longer renew must stop
// writing at once, and a restart is the only state that is certainly clean.
var errLostLease = errors.New("lost the leader lease")

// leaderElect runs lead while this process holds the Lease and returns when
// ctx ends (releasing the lease at once) or when leadership is lost.
func leaderElect(ctx context.Context, client kubernetes.Interface, o Options, reg prometheus.Registerer, logger *zap.Logger, lead func(context.Context) error) error {
	isLeader := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: "leader", Name: "is_leader",
		Help: "1 while this courier process holds the leader lease, else 0.",
	})
	reg.MustRegister(isLeader)

	host, _ := os.Hostname()
	id := host + "_" + rand.String(8)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.Namespace, Name: leaseName},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	log := logger.Named("leader").With(zap.String("identity", id), zap.String("lease", o.Namespace+"/"+leaseName))

	// The elector runs on its own context so that on shutdown the lease is
	// released only after the controllers have stopped writing.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	leadCtx, stopLeading := context.WithCancel(ctx)
	defer stopLeading()
	acquired := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.electionLease(),
		RenewDeadline:   o.RenewDeadline,
		RetryPeriod:     o.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            keys.FieldManager,
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
		return fmt.Errorf("leader election: %w", err)
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
		return nil
	}
	leadErr := lead(leadCtx)
	lost := ctx.Err() == nil && leadErr == nil
	stopElecting() // releases the lease
	<-electorDone
	if leadErr != nil {
		return leadErr
	}
	if lost {
		return errLostLease
	}
	return nil
}
