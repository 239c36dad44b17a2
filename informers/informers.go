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
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// SecretFieldSelector leaves Helm release Secrets out of every list and watch.
var SecretFieldSelector = fields.OneTermNotEqualSelector("type", wellknown.HelmReleaseType).String()

// Scope is what courier's caches hold (--watch-namespaces,
// --resource-label-selector).
type Scope struct {
	// Namespaces are the namespaces whose Secrets, ConfigMaps, workloads
	// and custom kinds courier lists and watches, each with an informer of
	// its own, and whose Namespace objects it reads by name; none: every
	// namespace, with cluster-wide informers.
	Namespaces []string
	// ResourceLabels is a label selector the API server applies to every
	// list and watch of Secrets and ConfigMaps; empty: all of them.
	ResourceLabels string
}

// Set is the shared informers courier runs, built once in main and handed to
// every controller. Read them through Informer() only, never a typed
// Lister(): the caches hold courier's own forms (content.Digested,
// workload.Object) beside typed objects, and a typed lister would panic on
// them.
type Set struct {
	factories []informers.SharedInformerFactory
	scope     Scope

	Secrets      Getter // Helm release Secrets left out
	ConfigMaps   Getter
	Namespaces   Getter
	Deployments  Getter
	StatefulSets Getter
	DaemonSets   Getter
	CronJobs     Getter
	Jobs         Getter
	// Custom is the custom kinds of --reload-resources (nil: none listed).
	Custom *Custom
	// ProviderStatuses is the Secrets Store CSI driver's reports
	// (NewProviderStatuses; nil without --reload-csi).
	ProviderStatuses cache.SharedIndexInformer
	running          sync.WaitGroup
}

// Getter is one informer of the Set.
type Getter interface {
	Informer() cache.SharedIndexInformer
}

// fixed is an informer built once.
type fixed struct{ inf cache.SharedIndexInformer }

func (f fixed) Informer() cache.SharedIndexInformer { return f.inf }

// New builds every informer (so all of them start, and readiness waits for
// all of them) without starting any. There is no resync: courier reacts to
// changes, and resyncs would only re-deliver what the cache already holds.
//
// roles is the configuration objects' roles depend on (package role): what
// the cache keeps of each Secret and ConfigMap, and how they are indexed.
// scope is what the caches hold.
func New(client kubernetes.Interface, roles role.Config, scope Scope) (*Set, error) {
	s := &Set{scope: scope}
	namespaces := scope.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	parts := map[string]map[string]cache.SharedIndexInformer{}
	add := func(what, ns string, inf cache.SharedIndexInformer) {
		if parts[what] == nil {
			parts[what] = map[string]cache.SharedIndexInformer{}
		}
		parts[what][ns] = inf
	}
	factory := func(ns string) informers.SharedInformerFactory {
		f := informers.NewSharedInformerFactoryWithOptions(client, 0,
			informers.WithTransform(Transform(SourcesIn(roles))), informers.WithNamespace(ns))
		s.factories = append(s.factories, f)
		add("secrets", ns, f.InformerFor(&corev1.Secret{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewFilteredSecretInformer(c, ns, resync, namespaceIndex(), func(o *metav1.ListOptions) {
				scope.Narrow(ns, roles.Namespace, o)
				o.FieldSelector = joinFields(SecretFieldSelector, o.FieldSelector)
			})
		}))
		add("configmaps", ns, f.InformerFor(&corev1.ConfigMap{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewFilteredConfigMapInformer(c, ns, resync, namespaceIndex(), func(o *metav1.ListOptions) {
				scope.Narrow(ns, roles.Namespace, o)
			})
		}))
		return f
	}
	for _, ns := range namespaces {
		f := factory(ns)
		add("deployments", ns, f.Apps().V1().Deployments().Informer())
		add("statefulsets", ns, f.Apps().V1().StatefulSets().Informer())
		add("daemonsets", ns, f.Apps().V1().DaemonSets().Informer())
		add("cronjobs", ns, f.Batch().V1().CronJobs().Informer())
		add("jobs", ns, f.Batch().V1().Jobs().Informer())
		if ns == metav1.NamespaceAll {
			add("namespaces", ns, f.Core().V1().Namespaces().Informer())
		} else {
			add("namespaces", ns, f.InformerFor(&corev1.Namespace{}, func(c kubernetes.Interface, _ time.Duration) cache.SharedIndexInformer {
				return namedNamespaceInformer(c, ns)
			}))
		}
	}
	if len(scope.Namespaces) == 0 && scope.ResourceLabels != "" {
		factory(roles.Namespace) // courier's own namespace, whole (Narrow)
	}
	one := func(what string) Getter {
		if len(parts[what]) == 1 {
			for _, inf := range parts[what] {
				return fixed{inf}
			}
		}
		return fixed{NewMulti(parts[what])}
	}
	s.Secrets, s.ConfigMaps, s.Namespaces = one("secrets"), one("configmaps"), one("namespaces")
	s.Deployments, s.StatefulSets, s.DaemonSets = one("deployments"), one("statefulsets"), one("daemonsets")
	s.CronJobs, s.Jobs = one("cronjobs"), one("jobs")
	for _, inf := range []Getter{s.Secrets, s.ConfigMaps} {
		if err := inf.Informer().AddIndexers(ContentIndexers(roles)); err != nil {
			return nil, fmt.Errorf("add indexers: %w", err)
		}
	}
	for _, inf := range []Getter{s.Deployments, s.StatefulSets, s.DaemonSets, s.CronJobs, s.Jobs} {
		if err := inf.Informer().AddIndexers(WorkloadIndexers); err != nil {
			return nil, fmt.Errorf("add indexers: %w", err)
		}
	}
	return s, nil
}

// Lists are the namespaces to list Secrets and ConfigMaps in, each with
// Narrow: Namespaces (own among them), or all ("") and, with
// ResourceLabels, own apart.
func (sc Scope) Lists(own string) []string {
	switch {
	case len(sc.Namespaces) > 0:
		return sc.Namespaces
	case sc.ResourceLabels != "":
		return []string{metav1.NamespaceAll, own}
	}
	return []string{metav1.NamespaceAll}
}

// Narrow sets what of the Secrets and ConfigMaps in namespace ns ("": all)
// the API server sends: those ResourceLabels selects, but in courier's own
// namespace own every one (its digest key, its settings, the default
// sources), which a list of its own then reads (Lists).
func (sc Scope) Narrow(ns, own string, o *metav1.ListOptions) {
	switch {
	case sc.ResourceLabels == "" || ns == own:
	case ns == metav1.NamespaceAll:
		o.LabelSelector = sc.ResourceLabels
		o.FieldSelector = fields.OneTermNotEqualSelector("metadata.namespace", own).String()
	default:
		o.LabelSelector = sc.ResourceLabels
	}
}

func joinFields(a, b string) string {
	if b == "" {
		return a
	}
	return a + "," + b
}

// namespaceIndex is a new map each time: an informer adds its indexers to
// the map it was given.
func namespaceIndex() cache.Indexers {
	return cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
}

// Start starts every informer; they stop when ctx ends. Call it once, after
// every controller has registered its handlers and indexers.
func (s *Set) Start(ctx context.Context) {
	for _, f := range s.factories {
		f.Start(ctx.Done())
	}
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
	for _, f := range s.factories {
		f.Shutdown()
	}
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
	for _, f := range s.factories {
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("informer cache for %v did not sync: %w", typ, context.Cause(ctx))
			}
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

func (s *Set) all() []Getter {
	return []Getter{s.Secrets, s.ConfigMaps, s.Namespaces, s.Deployments, s.StatefulSets, s.DaemonSets, s.CronJobs, s.Jobs}
}
