package reloader

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/workload"
)

// Preview asks the reloader's decision "what would you do with this
// workload now, and why" without acting, for courier status: the same
// gather and policies as sync, over caches filled once from objects read
// from the cluster. It holds none of a running courier's per-process state
// (no debounce window open, no storm, no Job being recreated, no change
// waiting for the replicator), so it tells what a courier deciding now
// from what is recorded on the objects (baselines, courier.dev/reloaded-at,
// a Job's status) would do.
type Preview struct{ c *Controller }

// NewPreview fills a preview's caches with objects: the Secrets and
// ConfigMaps the workloads consume, in full (the digest key among them; the
// other installations' keys and the sources of replicas may be metadata
// only), the workloads, typed, and Argo Rollouts as workload.Objects (so a
// Deployment whose template a Rollout takes is known as such). roles is
// what courier's caches keep of each object (informers.Transform); o as the
// running courier's (QPS, Burst, Clock and the hooks are not read).
func NewPreview(o Options, roles role.Config, objects []runtime.Object) (*Preview, error) {
	o.QPS, o.Burst, o.Pending, o.Replicating, o.ProviderStatuses, o.Notifier = 1, 1, nil, nil, nil, nil
	c := newController(nil, nil, prometheus.NewRegistry(), zap.NewNop(), o)
	indexer := func(ix cache.Indexers) cache.Indexer {
		all := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
		for name, f := range ix {
			all[name] = f
		}
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, all)
	}
	c.secrets, c.configMaps = indexer(informers.ContentIndexers(roles)), indexer(informers.ContentIndexers(roles))
	for _, kind := range workload.Kinds {
		c.kinds[kind] = kindInfo{indexer: indexer(informers.WorkloadIndexers), hashPath: workload.HashPath(kind)}
	}
	rollouts := workload.Resource{GroupResource: workload.Rollouts, Path: workload.HashPath(workload.Deployment)}
	c.kinds[workload.Rollout] = kindInfo{indexer: indexer(informers.CustomIndexers(rollouts)), hashPath: rollouts.Path}
	keep := informers.Transform(informers.SourcesIn(roles), func(string, string, string) bool { return true })
	for _, obj := range objects {
		into := c.kinds[workload.KindOf(obj)].indexer
		switch obj.(type) {
		case *corev1.Secret:
			into = c.secrets
		case *corev1.ConfigMap:
			into = c.configMaps
		}
		if into == nil {
			return nil, fmt.Errorf("reloader preview: %T is neither a Secret, a ConfigMap nor a workload", obj)
		}
		cached, err := keep(obj.DeepCopyObject())
		if err != nil {
			return nil, err
		}
		if err := into.Add(cached); err != nil {
			return nil, err
		}
	}
	return &Preview{c}, nil
}

// Explain is what the reloader would do with the workload kind
// namespace/name now, and why.
func (p *Preview) Explain(ctx context.Context, kind, namespace, name string) (Explanation, error) {
	f, err := p.c.gather(ctx, key{Kind: kind, Namespace: namespace, Name: name}, time.Time{}, true)
	if err != nil {
		return Explanation{}, err
	}
	if f == nil {
		return Explanation{}, fmt.Errorf("%s %s/%s was not read", kind, namespace, name)
	}
	return explain(f, verdictOf(f)), nil
}
