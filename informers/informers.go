package informers

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// SecretFieldSelector leaves Helm release Secrets out of every list and watch.
var SecretFieldSelector = fields.OneTermNotEqualSelector("type", wellknown.HelmReleaseType).String()

// Set is the shared informers courier runs, built once in main and handed to
// every controller. Read them through Informer() only, never a typed
// Lister(): the caches hold courier's own forms (content.Digested,
// workload.Object) beside typed objects, and a typed lister would panic on
// them.
type Set struct {
	factory informers.SharedInformerFactory

	Secrets      informerGetter // with the Helm field selector
	ConfigMaps   coreinformers.ConfigMapInformer
	Namespaces   coreinformers.NamespaceInformer
	Deployments  appsinformers.DeploymentInformer
	StatefulSets appsinformers.StatefulSetInformer
	DaemonSets   appsinformers.DaemonSetInformer
	CronJobs     batchinformers.CronJobInformer
	Jobs         batchinformers.JobInformer
	// Custom is the custom kinds of --reload-resources (nil: none listed).
	Custom *Custom
	// ProviderStatuses is the Secrets Store CSI driver's reports
	// (NewProviderStatuses; nil without --reload-csi).
	ProviderStatuses cache.SharedIndexInformer
	running          sync.WaitGroup
}

// New builds every informer (so all of them start, and readiness waits for
// all of them) without starting any. There is no resync: courier reacts to
// changes, and resyncs would only re-deliver what the cache already holds.
//
// roles is the configuration objects' roles depend on (package role): what
// the cache keeps of each Secret and ConfigMap, and how they are indexed.
func New(client kubernetes.Interface, roles role.Config) (*Set, error) {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(Transform(SourcesIn(roles))))
	s := &Set{
		factory:      f,
		ConfigMaps:   f.Core().V1().ConfigMaps(),
		Namespaces:   f.Core().V1().Namespaces(),
		Deployments:  f.Apps().V1().Deployments(),
		StatefulSets: f.Apps().V1().StatefulSets(),
		DaemonSets:   f.Apps().V1().DaemonSets(),
		CronJobs:     f.Batch().V1().CronJobs(),
		Jobs:         f.Batch().V1().Jobs(),
	}
	s.Secrets = secretInformer{f}
	for _, inf := range s.all() {
		inf.Informer()
	}
	for _, inf := range []informerGetter{s.Secrets, s.ConfigMaps} {
		if err := inf.Informer().AddIndexers(ContentIndexers(roles)); err != nil {
			return nil, fmt.Errorf("add indexers: %w", err)
		}
	}
	for _, inf := range []informerGetter{s.Deployments, s.StatefulSets, s.DaemonSets, s.CronJobs, s.Jobs} {
		if err := inf.Informer().AddIndexers(WorkloadIndexers); err != nil {
			return nil, fmt.Errorf("add indexers: %w", err)
		}
	}
	return s, nil
}

// Start starts every informer; they stop when ctx ends. Call it once, after
// every controller has registered its handlers and indexers.
func (s *Set) Start(ctx context.Context) {
	s.factory.Start(ctx.Done())
	if s.Custom != nil {
		s.Custom.Start(ctx)
	}
	if s.ProviderStatuses != nil {
		s.running.Add(1)
		go func() {
			defer s.running.Done()
			s.ProviderStatuses.RunWithContext(ctx)
		}()
	}
}

// Shutdown waits for every informer goroutine to end after ctx is done.
func (s *Set) Shutdown() {
	s.factory.Shutdown()
	if s.Custom != nil {
		s.Custom.Shutdown()
	}
	s.running.Wait()
}

// HasSynced reports whether every informer has completed its initial list.
func (s *Set) HasSynced() bool {
	for _, inf := range s.all() {
		if !inf.Informer().HasSynced() {
			return false
		}
	}
	return s.Custom == nil || s.Custom.HasSynced()
}

// WaitForSync blocks until every informer has synced or ctx ends; the
// custom kinds' are not waited for (HasSynced, readiness, includes them): a
// kind courier may not watch must not hold up everything else, and the
// reloader takes each kind's objects as its informer delivers them.
func (s *Set) WaitForSync(ctx context.Context) error {
	for typ, ok := range s.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer cache for %v did not sync: %w", typ, context.Cause(ctx))
		}
	}
	return nil
}

// Workloads returns the workload informers by kind (workload.Kinds).
func (s *Set) Workloads() map[string]cache.SharedIndexInformer {
	return map[string]cache.SharedIndexInformer{
		workload.Deployment:  s.Deployments.Informer(),
		workload.StatefulSet: s.StatefulSets.Informer(),
		workload.DaemonSet:   s.DaemonSets.Informer(),
		workload.CronJob:     s.CronJobs.Informer(),
		workload.Job:         s.Jobs.Informer(),
	}
}

type informerGetter interface {
	Informer() cache.SharedIndexInformer
}

func (s *Set) all() []informerGetter {
	return []informerGetter{s.Secrets, s.ConfigMaps, s.Namespaces, s.Deployments, s.StatefulSets, s.DaemonSets, s.CronJobs, s.Jobs}
}

// secretInformer is the factory's Secret informer with the Helm field
// selector; the factory applies it only to this one type.
type secretInformer struct {
	f informers.SharedInformerFactory
}

func (i secretInformer) Informer() cache.SharedIndexInformer {
	return i.f.InformerFor(&corev1.Secret{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredSecretInformer(c, metav1.NamespaceAll, resync,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
			func(o *metav1.ListOptions) { o.FieldSelector = SecretFieldSelector })
	})
}
