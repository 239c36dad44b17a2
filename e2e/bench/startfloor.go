package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// startFloor is the floor of scenario 1: a client with no logic that fills
// the caches courier fills at start — every Secret but Helm's, ConfigMap,
// Namespace and workload, through the same shared informers (protobuf, the
// API server's streaming list) with no transform and no index — and returns
// how long until all of them synced. courier's start adds its transform,
// indexes, leader election and readiness to this.
func startFloor(ctx context.Context, c kubernetes.Interface) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	t0 := time.Now()
	notHelm := informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermNotEqualSelector("type", helmType).String()
	})
	secrets := informers.NewSharedInformerFactoryWithOptions(c, 0, notHelm)
	others := informers.NewSharedInformerFactory(c, 0)
	synced := []cache.InformerSynced{
		secrets.Core().V1().Secrets().Informer().HasSynced,
		others.Core().V1().ConfigMaps().Informer().HasSynced,
		others.Core().V1().Namespaces().Informer().HasSynced,
		others.Apps().V1().Deployments().Informer().HasSynced,
		others.Apps().V1().StatefulSets().Informer().HasSynced,
		others.Apps().V1().DaemonSets().Informer().HasSynced,
		others.Batch().V1().CronJobs().Informer().HasSynced,
	}
	secrets.Start(ctx.Done())
	others.Start(ctx.Done())
	defer func() {
		cancel()
		secrets.Shutdown()
		others.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return 0, fmt.Errorf("start floor: caches not synced: %w", ctx.Err())
	}
	return time.Since(t0).Seconds(), nil
}

// measureStartFloor prints startFloor's median over repeats on the cluster
// of kubeconfig (`-start-floor`), as protobuf like courier.
func measureStartFloor(ctx context.Context, kubeconfig string, repeats int) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	c, err := harnessClient(cfg)
	if err != nil {
		return err
	}
	var xs []float64
	for i := range repeats {
		s, err := startFloor(ctx, c)
		if err != nil {
			return err
		}
		xs = append(xs, s)
		logf("start floor %d: %.2fs", i+1, s)
	}
	fmt.Printf("start floor: median %.2fs over %d\n", summarize(xs).Median, len(xs))
	return nil
}
