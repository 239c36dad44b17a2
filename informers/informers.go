package informers

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
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
	// contents are each namespace's factory of Secrets and ConfigMaps,
	// started once its built-in workloads (workloads) are listed (Start).
	contents map[string]informers.SharedInformerFactory
	// metadata are each namespace's metadata-only informers of Secrets and
	// ConfigMaps (split), started with its contents.
	metadata map[string][]cache.SharedIndexInformer
	// workloads are each namespace's built-in workload informers
	// (metav1.NamespaceAll: every namespace's).
	workloads map[string][]cache.SharedIndexInformer

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
	// Reach is which watched namespaces courier may list in now.
	Reach *Reach
	// Remotes, if set, are the clusters courier replicates into; they
	// start and stop with the rest (their own readiness holds nothing up).
	Remotes *Remotes
	// parts are the informers WaitForSync waits for, by namespace.
	parts   map[string][]cache.SharedIndexInformer
	running sync.WaitGroup

	mu        sync.Mutex
	stop      <-chan struct{}   // closed when the informers stop (Start's ctx)
	available []func(ns string) // told when a namespace is available again
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
//
// meta, if set, is a metadata client: the Secrets and ConfigMaps courier
// does not manage (no managed-by label of courier's: every tenant's, the
// sources) are then listed and watched as their metadata only, so their
// values never reach courier (see split); nil lists them whole (tests).
func New(client kubernetes.Interface, meta metadata.Interface, roles role.Config, scope Scope, logger *zap.Logger) (*Set, error) {
	s := &Set{Reach: newReach(scope.Namespaces, logger), parts: map[string][]cache.SharedIndexInformer{}, contents: map[string]informers.SharedInformerFactory{},
		metadata: map[string][]cache.SharedIndexInformer{}, workloads: map[string][]cache.SharedIndexInformer{}}
	s.Reach.served = s.announce
	type factory = informers.SharedInformerFactory
	kinds := []struct {
		field    *Getter
		of       func(f factory, ns string) cache.SharedIndexInformer
		content  bool // a Secret or ConfigMap: started after the workloads
		workload bool
	}{
		{content: true, field: &s.Secrets, of: func(f factory, ns string) cache.SharedIndexInformer {
			want := scope.SecretOptions()
			return s.split(meta, ns, secretsResource, want, func(managed string) cache.SharedIndexInformer {
				return typed(f, s.Reach, ns, &corev1.Secret{}, func(c kubernetes.Interface) resourceClient[*corev1.SecretList] { return c.CoreV1().Secrets(ns) }, func(o *metav1.ListOptions) {
					o.FieldSelector, o.LabelSelector = want.FieldSelector, and(want.LabelSelector, managed)
				})
			})
		}},
		{content: true, field: &s.ConfigMaps, of: func(f factory, ns string) cache.SharedIndexInformer {
			want := scope.ConfigMapOptions()
			return s.split(meta, ns, configMapsResource, want, func(managed string) cache.SharedIndexInformer {
				return typed(f, s.Reach, ns, &corev1.ConfigMap{}, func(c kubernetes.Interface) resourceClient[*corev1.ConfigMapList] { return c.CoreV1().ConfigMaps(ns) }, func(o *metav1.ListOptions) {
					o.LabelSelector = and(want.LabelSelector, managed)
				})
			})
		}},
		{field: &s.Namespaces, of: func(f factory, ns string) cache.SharedIndexInformer {
			if ns == metav1.NamespaceAll {
				return typed(f, s.Reach, ns, &corev1.Namespace{}, func(c kubernetes.Interface) resourceClient[*corev1.NamespaceList] { return c.CoreV1().Namespaces() }, nil)
			}
			return f.InformerFor(&corev1.Namespace{}, func(c kubernetes.Interface, _ time.Duration) cache.SharedIndexInformer {
				return namedNamespaceInformer(c, ns, func(err error) { s.Reach.result(ns, "*v1.Namespace", err) })
			})
		}},
		{workload: true, field: &s.Deployments, of: func(f factory, ns string) cache.SharedIndexInformer {
			return typed(f, s.Reach, ns, &appsv1.Deployment{}, func(c kubernetes.Interface) resourceClient[*appsv1.DeploymentList] { return c.AppsV1().Deployments(ns) }, nil)
		}},
		{workload: true, field: &s.StatefulSets, of: func(f factory, ns string) cache.SharedIndexInformer {
			return typed(f, s.Reach, ns, &appsv1.StatefulSet{}, func(c kubernetes.Interface) resourceClient[*appsv1.StatefulSetList] {
				return c.AppsV1().StatefulSets(ns)
			}, nil)
		}},
		{workload: true, field: &s.DaemonSets, of: func(f factory, ns string) cache.SharedIndexInformer {
			return typed(f, s.Reach, ns, &appsv1.DaemonSet{}, func(c kubernetes.Interface) resourceClient[*appsv1.DaemonSetList] { return c.AppsV1().DaemonSets(ns) }, nil)
		}},
		{workload: true, field: &s.CronJobs, of: func(f factory, ns string) cache.SharedIndexInformer {
			return typed(f, s.Reach, ns, &batchv1.CronJob{}, func(c kubernetes.Interface) resourceClient[*batchv1.CronJobList] { return c.BatchV1().CronJobs(ns) }, nil)
		}},
		{workload: true, field: &s.Jobs, of: func(f factory, ns string) cache.SharedIndexInformer {
			return typed(f, s.Reach, ns, &batchv1.Job{}, func(c kubernetes.Interface) resourceClient[*batchv1.JobList] { return c.BatchV1().Jobs(ns) }, nil)
		}},
	}
	parts := make([]map[string]cache.SharedIndexInformer, len(kinds))
	transform := Transform(SourcesIn(roles), s.consumed)
	for _, ns := range scope.Each() {
		f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(transform), informers.WithNamespace(ns))
		fc := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(transform), informers.WithNamespace(ns))
		s.factories = append(s.factories, f)
		s.contents[ns] = fc
		for i, k := range kinds {
			if parts[i] == nil {
				parts[i] = map[string]cache.SharedIndexInformer{}
			}
			if k.content {
				parts[i][ns] = k.of(fc, ns)
			} else {
				parts[i][ns] = k.of(f, ns)
			}
			if k.workload {
				s.workloads[ns] = append(s.workloads[ns], parts[i][ns])
			}
		}
	}
	for i, k := range kinds {
		w := whole(parts[i])
		if m, ok := w.(*Multi); ok {
			m.skip = s.Reach.Refused // a namespace courier may not list in holds nothing up
		}
		*k.field = fixed{w}
		for ns, inf := range parts[i] {
			s.parts[ns] = append(s.parts[ns], inf)
			if ns == metav1.NamespaceAll {
				continue
			}
			if err := inf.SetWatchErrorHandlerWithContext(refusedIn(ns, logger)); err != nil {
				return nil, err
			}
		}
	}
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

// typed is f's informer of obj, through the client of returns, tweak (if
// set) changing every request's options: informerOf, with the factory's
// transform.
// The informer of namespace ns (--watch-namespaces; "": every namespace)
// tells r whether the API server allows each of its lists and watches.
func typed[L runtime.Object](f informers.SharedInformerFactory, r *Reach, ns string, obj runtime.Object, of func(kubernetes.Interface) resourceClient[L], tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	return f.InformerFor(obj, func(c kubernetes.Interface, _ time.Duration) cache.SharedIndexInformer {
		var rc resourceClient[L] = of(c)
		if ns != metav1.NamespaceAll {
			rc = reporting[L]{c: rc, report: r.reportingTo(ns, fmt.Sprintf("%T", obj))}
		}
		// No namespace index: nothing reads one, and it costs every cached
		// object an entry (about 50 bytes). A new map each time: an informer
		// adds its indexers to the map it was given.
		return informerOf(rc, c, obj, "", tweak, cache.Indexers{})
	})
}

var (
	secretsResource    = corev1.SchemeGroupVersion.WithResource("secrets")
	configMapsResource = corev1.SchemeGroupVersion.WithResource("configmaps")
	// managedByCourier selects the Secrets and ConfigMaps courier wrote and
	// manages (replicas, backups, the digest key); notManagedByCourier the
	// rest, those without the label included.
	managedByCourier    = wellknown.ManagedBy + "=" + wellknown.ManagedByValue
	notManagedByCourier = wellknown.ManagedBy + "!=" + wellknown.ManagedByValue
)

// split is namespace ns's informer of resource (Secrets or ConfigMaps)
// listed and watched with want's selectors: without meta, full (full's
// informer with no more selector); with meta, two parts divided by
// courier's managed-by label (NewSplit). What courier wrote is listed and
// watched in full (full's informer, managedByCourier): the cache holds
// its digests, so a replica edited by hand is seen and reverted without a
// read. Everything else — every tenant's objects, the sources — only as its
// metadata (metadataOf, notManagedByCourier): the API server sends no
// values, and what courier must read of one (a source's values, a consumed
// input's digests) it reads by name when its resourceVersion moves.
func (s *Set) split(meta metadata.Interface, ns string, resource schema.GroupVersionResource, want metav1.ListOptions, full func(managed string) cache.SharedIndexInformer) cache.SharedIndexInformer {
	if meta == nil {
		return full("")
	}
	tenants := metadataOf(meta, s.Reach, ns, resource, func(o *metav1.ListOptions) {
		o.FieldSelector, o.LabelSelector = want.FieldSelector, and(want.LabelSelector, notManagedByCourier)
	})
	s.metadata[ns] = append(s.metadata[ns], tenants)
	return NewSplit([]string{"managed by courier", "metadata only"}, full(managedByCourier), tenants)
}

// metadataOf is namespace ns's informer of resource's objects as their
// metadata only (PartialObjectMetadata, held as content.FromMetadata),
// tweak changing every request's options.
func metadataOf(c metadata.Interface, r *Reach, ns string, resource schema.GroupVersionResource, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	var rc resourceClient[*metav1.PartialObjectMetadataList] = c.Resource(resource).Namespace(ns)
	if ns != metav1.NamespaceAll {
		rc = reporting[*metav1.PartialObjectMetadataList]{c: rc, report: r.reportingTo(ns, resource.Resource+" (metadata only)")}
	}
	inf := informerOf(rc, c, &metav1.PartialObjectMetadata{}, resource.Resource+" (metadata only)", tweak, cache.Indexers{})
	_ = inf.SetTransform(MetadataTransform(resource == secretsResource)) // not started: cannot fail
	return inf
}

// and is the label selector both a and b select (either may be empty).
func and(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "," + b
}

// refusedIn is the watch error handler of an informer of namespace ns
// (--watch-namespaces): a refusal names the namespace and the fix.
func refusedIn(ns string, logger *zap.Logger) cache.WatchErrorHandlerWithContext {
	return func(ctx context.Context, r *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			logger.Error("courier may not list or watch in a namespace of --watch-namespaces: it goes on without it (courier_watch_namespace_unavailable) until allowed; create the namespace and bind courier's Role there (manifests/namespace-scoped/access, or the chart's scope.namespaces), or remove it from the flag",
				zap.String("namespace", ns), zap.Error(err))
			return
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}
}

// Each is the namespaces to list and watch in, one informer each:
// Namespaces, or all ("").
func (sc Scope) Each() []string {
	if len(sc.Namespaces) == 0 {
		return []string{metav1.NamespaceAll}
	}
	return sc.Namespaces
}

// SecretOptions and ConfigMapOptions are the list (and watch) options of
// Secrets and ConfigMaps: the Helm field selector, and ResourceLabels.
func (sc Scope) SecretOptions() metav1.ListOptions {
	return metav1.ListOptions{FieldSelector: SecretFieldSelector, LabelSelector: sc.ResourceLabels}
}

func (sc Scope) ConfigMapOptions() metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: sc.ResourceLabels}
}

// Start starts every informer; they stop when ctx ends. Call it once, after
// every controller has registered its handlers and indexers.
func (s *Set) Start(ctx context.Context) {
	s.mu.Lock()
	s.stop = ctx.Done()
	s.mu.Unlock()
	for _, f := range s.factories {
		f.Start(ctx.Done())
	}
	for ns, f := range s.contents {
		if inf := s.metadata[ns]; len(inf) > 0 {
			// Split: neither half holds content the transform would keep
			// for a consumer, so nothing waits for the workloads.
			f.Start(ctx.Done())
			for _, inf := range inf {
				s.running.Go(func() { inf.RunWithContext(ctx) })
			}
			continue
		}
		s.running.Add(1)
		go func() {
			defer s.running.Done()
			if s.workloadsListed(ctx, ns) {
				f.Start(ctx.Done())
			}
		}()
	}
	if s.Custom != nil {
		s.Custom.Start(ctx)
	}
	if s.Remotes != nil {
		s.Remotes.Start(ctx)
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
	for _, f := range s.contents {
		f.Shutdown() // Start is a no-op after it
	}
	if s.Custom != nil {
		s.Custom.Shutdown()
	}
	s.running.Wait()
}

// workloadsListed waits until the built-in workload informers of namespace
// ns have listed, or courier may not list there (Reach), or ctx ends
// (false). Without a metadata client (whole lists: tests), Secrets and
// ConfigMaps are listed after them, so the transform knows what the
// workloads consume when it first holds each input (consumed).
func (s *Set) workloadsListed(ctx context.Context, ns string) bool {
	listed := func() bool {
		for _, inf := range s.workloads[ns] {
			if !inf.HasSynced() {
				return false
			}
		}
		return true
	}
	err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		return listed() || s.Reach.Refused(ns), nil
	})
	return err == nil
}

// consumed reports whether a workload in the cache consumes the Secret or
// ConfigMap kind namespace/name (the transform's Consumed), asking the
// informers of its namespace only. The custom kinds' informers start with
// their CRDs, beside the Secrets' and ConfigMaps', so an input only they
// consume may be held as its metadata only after a start, and is read when
// the reloader first syncs its consumer.
func (s *Set) consumed(kind, namespace, name string) bool {
	ik := InputKey(kind, namespace, name)
	here, ok := s.workloads[namespace]
	if !ok {
		here = s.workloads[metav1.NamespaceAll]
	}
	for _, inf := range here {
		if objs, _ := Consumers(inf.GetIndexer(), ik); len(objs) > 0 {
			return true
		}
	}
	return s.Custom != nil && s.Custom.consumes(ik)
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
// reloader takes each kind's objects as its informer delivers them. Nor are
// those of a watched namespace courier may not list in now (Reach).
func (s *Set) WaitForSync(ctx context.Context) error {
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		for ns := range s.parts {
			if !s.synced(ns) && !s.Reach.Refused(ns) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("informer caches did not sync: %w", context.Cause(ctx))
	}
	return nil
}

// synced reports whether every informer of namespace ns has listed.
func (s *Set) synced(ns string) bool {
	for _, inf := range s.parts[ns] {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// Unavailable reports whether courier's caches cannot speak for namespace
// ns now (package view): the API server refuses a list or watch there, or
// one allowed again has not refilled its cache yet. A namespace courier does
// not watch at all is the view's to judge.
func (s *Set) Unavailable(ns string) bool {
	if s.Reach.Refused(ns) {
		return true
	}
	_, watched := s.parts[ns]
	return watched && !s.synced(ns)
}

// OnAvailable registers f to be told of each watched namespace that is
// available again (Unavailable turned false after a refusal): what waited
// for it may go on (the replicator's pairs into it).
func (s *Set) OnAvailable(f func(ns string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.available = append(s.available, f)
}

// announce tells OnAvailable's functions that namespace ns is served
// again, once every informer of ns has synced (or the informers stop).
func (s *Set) announce(ns string) {
	s.mu.Lock()
	stop, fs := s.stop, slices.Clone(s.available)
	s.mu.Unlock()
	go func() {
		for _, inf := range s.parts[ns] {
			select {
			case <-inf.HasSyncedChecker().Done():
			case <-stop:
				return
			}
		}
		for _, f := range fs {
			f(ns)
		}
	}()
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
