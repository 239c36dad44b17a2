package informers

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/internal/metrics"
	"github.com/courier-k8s/courier/internal/workload"
)

// RolloutsByWorkloadRef indexes Rollouts with spec.workloadRef by the
// Deployment they take their pod template from, "<namespace>/<name>".
const RolloutsByWorkloadRef = "courier.dev/rollouts-by-workload-ref"

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// KindHandler is told when a custom kind is served, with the informer of its
// objects (built, not started); the function it returns is called when the
// kind stops being served (its CRD deleted, or its version or kind changed).
type KindHandler func(workload.Custom, cache.SharedIndexInformer) (stop func(), err error)

// Custom runs the informers of the custom kinds in --reload-resources. It
// watches each kind's CustomResourceDefinition by name (so RBAC can grant
// exactly those, and nothing is watched for kinds not listed) and, while the
// CRD is established, an informer of the kind's objects. A kind whose CRD is
// installed later is picked up then; one whose CRD goes is dropped.
type Custom struct {
	client  dynamic.Interface
	scope   Scope // where the kinds' objects are watched
	logger  *zap.Logger
	handler KindHandler
	crds    []crdWatch
	wg      sync.WaitGroup

	warnedMu sync.Mutex
	// warned: unreadable objects warned of, by kind, UID and generation;
	// an entry lives as long as its object, a kind's as long as its watch.
	warned map[schema.GroupResource]map[types.UID]int64

	mu      sync.Mutex
	ctx     context.Context
	running map[schema.GroupResource]*runningKind
	// forbidden: listed kinds whose CRD or objects courier was refused the
	// right to list or watch, and whose refused informer has made no
	// progress since. They hold nothing up (Settled, HasSynced) and are
	// reported (Collect).
	forbidden map[schema.GroupResource]refusal
}

// refusal is a refused list or watch: the resourceVersion its informer had
// synced to then, and how to read it now (a successful list moves it).
type refusal struct {
	at  string
	now func() string
}

// crdWatch is the informer of one listed kind's CRD.
type crdWatch struct {
	resource workload.Resource
	inf      cache.SharedIndexInformer
	handled  cache.ResourceEventHandlerRegistration // its initial list is handled
}

type runningKind struct {
	kind   workload.Custom
	inf    cache.SharedIndexInformer
	cancel context.CancelFunc
	stop   func()
}

// NewCustom builds the CRD informers for resources (none started); the
// kinds' objects are watched in scope's namespaces.
func NewCustom(client dynamic.Interface, resources []workload.Resource, scope Scope, logger *zap.Logger) (*Custom, error) {
	c := &Custom{client: client, scope: scope, logger: logger.Named("custom-kinds"), running: map[schema.GroupResource]*runningKind{}, forbidden: map[schema.GroupResource]refusal{}}
	for _, r := range resources {
		name := r.GroupResource.String()
		inf := informerOf(client.Resource(crdResource), client, &unstructured.Unstructured{}, crdResource.String(),
			func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + name }, cache.Indexers{})
		if err := inf.SetTransform(trimCRD); err != nil {
			return nil, err
		}
		if err := inf.SetWatchErrorHandlerWithContext(c.watchError(r.GroupResource, "the CustomResourceDefinition "+name,
			"grant list and watch on customresourcedefinitions named "+name+" (the chart does, for each of reloadResources; manifests/: see docs/reload.md)")); err != nil {
			return nil, err
		}
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.reconcile(r, obj) },
			UpdateFunc: func(_, obj any) { c.reconcile(r, obj) },
			DeleteFunc: func(any) { c.reconcile(r, nil) },
		})
		if err != nil {
			return nil, err
		}
		c.crds = append(c.crds, crdWatch{resource: r, inf: inf, handled: reg})
	}
	return c, nil
}

// OnKind sets who is told of the kinds served; call it before Start.
func (c *Custom) OnKind(h KindHandler) { c.handler = h }

// Start starts the CRD informers; the kinds' informers start as their CRDs
// are seen. Everything stops when ctx ends.
func (c *Custom) Start(ctx context.Context) {
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
	for _, w := range c.crds {
		c.run(ctx, w.inf)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			if cache.WaitForCacheSync(ctx.Done(), w.handled.HasSynced) && len(w.inf.GetStore().ListKeys()) == 0 {
				c.notInstalled(w.resource)
			}
		}()
	}
}

// consumes reports whether an object of a kind running now consumes the
// input ik, an InputKey (Set.consumed).
func (c *Custom) consumes(ik string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range c.running {
		if objs, _ := Consumers(k.inf.GetIndexer(), ik); len(objs) > 0 {
			return true
		}
	}
	return false
}

func (c *Custom) notInstalled(r workload.Resource) {
	c.logger.Info("a kind listed in --reload-resources is not installed; courier watches it once its CustomResourceDefinition is established", zap.Stringer("resource", r.GroupResource))
}

func (c *Custom) run(ctx context.Context, inf cache.SharedIndexInformer) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		inf.RunWithContext(ctx)
	}()
}

// Shutdown waits for every informer goroutine to end after ctx is done.
func (c *Custom) Shutdown() { c.wg.Wait() }

// HasSynced reports whether every CRD informer's initial list has been
// handled (so the kinds served at start have informers) and every running
// kind's informer has completed its initial list.
func (c *Custom) HasSynced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.crds {
		if !c.syncedLocked(w) && !c.forbiddenLocked(w) {
			return false
		}
	}
	return true
}

// syncedLocked reports whether w's CRD list is handled and, if its kind is
// served, the kind's informer has synced. c.mu is held.
func (c *Custom) syncedLocked(w crdWatch) bool {
	if !w.handled.HasSynced() {
		return false
	}
	r := c.running[w.resource.GroupResource]
	return r == nil || r.inf.HasSynced()
}

// forbiddenLocked reports whether courier may not watch w's kind: a list or
// watch of its CRD or objects was refused and nothing has synced since (a
// grant given later ends it). c.mu is held.
func (c *Custom) forbiddenLocked(w crdWatch) bool {
	gr := w.resource.GroupResource
	f, ok := c.forbidden[gr]
	if !ok {
		return false
	}
	if f.now() != f.at {
		delete(c.forbidden, gr)
		c.logger.Info("courier may watch a listed kind again", zap.Stringer("resource", gr))
		return false
	}
	return true
}

var unreadableDesc = prometheus.NewDesc(metrics.Namespace+"_custom_kind_unreadable_objects",
	"Objects of a kind listed in --reload-resources that courier cannot read (a field path through a value, a workloadRef to anything but a Deployment): they are not reloaded; their log line says why.",
	[]string{"resource"}, nil)

var unwatchableDesc = prometheus.NewDesc(metrics.Namespace+"_custom_kind_watch_forbidden",
	"1 for a kind listed in --reload-resources that courier may not list or watch (its CRD or its objects): it is not reloaded, and holds nothing else up; grant what the log line names.",
	[]string{"resource"}, nil)

// Describe and Collect make Custom a Prometheus collector of
// courier_custom_kind_watch_forbidden and
// courier_custom_kind_unreadable_objects, one series each per listed kind.
func (c *Custom) Describe(ch chan<- *prometheus.Desc) {
	ch <- unwatchableDesc
	ch <- unreadableDesc
}

// Collect: see Describe.
func (c *Custom) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.crds {
		v := 0.0
		if c.forbiddenLocked(w) {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(unwatchableDesc, prometheus.GaugeValue, v, w.resource.GroupResource.String())
	}
	c.warnedMu.Lock()
	defer c.warnedMu.Unlock()
	for _, w := range c.crds {
		gr := w.resource.GroupResource
		ch <- prometheus.MustNewConstMetric(unreadableDesc, prometheus.GaugeValue, float64(len(c.warned[gr])), gr.String())
	}
}

// Settled reports whether courier knows in full the objects of gr, if it
// is listed: its CRD's initial list is handled and, if it is served, its
// informer has synced. Unlisted kinds are settled.
func (c *Custom) Settled(gr schema.GroupResource) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.crds {
		if w.resource.GroupResource == gr {
			return c.syncedLocked(w) || c.forbiddenLocked(w) // a kind courier may not watch holds nothing up
		}
	}
	return true
}

// reconcile starts, restarts or stops r's informer as its CRD (nil: gone)
// says.
func (c *Custom) reconcile(r workload.Resource, crd any) {
	want, served := servedKind(r, crd)
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.running[r.GroupResource]
	if cur != nil && served && cur.kind.GVR() == want.GVR() && cur.kind.Name() == want.Name() {
		return
	}
	if cur != nil {
		cur.stop()
		cur.cancel()
		delete(c.running, r.GroupResource)
		c.forgetWarned(r.GroupResource, "")
		c.logger.Info("stopped watching a custom kind: its CustomResourceDefinition is gone or changed", zap.Stringer("resource", r.GroupResource))
	}
	if !served {
		if crd == nil {
			c.notInstalled(r)
		} else {
			c.logger.Info("a kind listed in --reload-resources has a CustomResourceDefinition that is not established or serves no version; courier watches it once it does", zap.Stringer("resource", r.GroupResource))
		}
		return
	}
	inf := perNamespace(c.scope, func(ns string) cache.SharedIndexInformer {
		return informerOf(c.client.Resource(want.GVR()).Namespace(ns), c.client, &unstructured.Unstructured{}, want.GVR().String(), nil, cache.Indexers{})
	})
	indexers := CustomIndexers(r)
	_, herr := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if m, err := meta.Accessor(Unwrap(obj)); err == nil {
			c.forgetWarned(r.GroupResource, m.GetUID())
		}
	}})
	err := errors.Join(herr, inf.SetTransform(c.objectTransform(r.GroupResource, want)), inf.AddIndexers(indexers),
		inf.SetWatchErrorHandlerWithContext(c.watchError(r.GroupResource, want.Kind+" objects ("+want.GVR().String()+")",
			"grant list, watch and patch on "+r.GroupResource.String()+" (the chart does, for each of reloadResources; manifests/: see docs/reload.md)")))
	var stop func()
	if err == nil {
		stop, err = c.handler(want, inf)
	}
	if err != nil {
		c.logger.Error("cannot reload a custom kind", zap.Stringer("resource", r.GroupResource), zap.Error(err))
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	c.running[r.GroupResource] = &runningKind{kind: want, inf: inf, cancel: cancel, stop: stop}
	c.run(ctx, inf)
	c.logger.Info("watching a custom kind", zap.Stringer("resource", r.GroupResource), zap.String("kind", want.Name()), zap.String("version", want.Version))
}

// objectTransform keeps of each object of kind what the reloader reads
// (workload.Object). An object courier cannot read is kept with its
// metadata only, so it is never reloaded, and the reason is logged.
func (c *Custom) objectTransform(gr schema.GroupResource, kind workload.Custom) cache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		o, err := workload.ObjectOf(kind, u) // o is never nil
		switch {
		case err == nil:
			c.forgetWarned(gr, o.GetUID()) // readable (again)
		case c.firstWarning(gr, o):
			c.logger.Warn("a custom resource courier cannot read", zap.Error(err))
		}
		return o, nil
	}
}

// firstWarning reports whether o's generation was not warned of before (an
// operator's status writes bring the same object again and again).
func (c *Custom) firstWarning(gr schema.GroupResource, o *workload.Object) bool {
	c.warnedMu.Lock()
	defer c.warnedMu.Unlock()
	if c.warned == nil {
		c.warned = map[schema.GroupResource]map[types.UID]int64{}
	}
	if c.warned[gr] == nil {
		c.warned[gr] = map[types.UID]int64{}
	}
	if g, ok := c.warned[gr][o.GetUID()]; ok && g == o.GetGeneration() {
		return false
	}
	c.warned[gr][o.GetUID()] = o.GetGeneration()
	return true
}

// forgetWarned drops what was warned of an object that is gone (uid), or
// of every object of a kind no longer watched (uid "").
func (c *Custom) forgetWarned(gr schema.GroupResource, uid types.UID) {
	c.warnedMu.Lock()
	defer c.warnedMu.Unlock()
	if uid == "" {
		delete(c.warned, gr)
		return
	}
	delete(c.warned[gr], uid)
}

// warnedCount is how many objects are remembered as warned of.
func (c *Custom) warnedCount() int {
	c.warnedMu.Lock()
	defer c.warnedMu.Unlock()
	n := 0
	for _, m := range c.warned {
		n += len(m)
	}
	return n
}

// watchError logs a failed list or watch of what, with the fix when
// courier is not allowed to.
func (c *Custom) watchError(gr schema.GroupResource, what, fix string) cache.WatchErrorHandlerWithContext {
	return func(ctx context.Context, r *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			c.mu.Lock()
			// The refused reflector's own version: with --watch-namespaces
			// the kind's informer is a Multi, whose other namespaces'
			// progress says nothing of this one.
			c.forbidden[gr] = refusal{at: r.LastSyncResourceVersion(), now: r.LastSyncResourceVersion}
			c.mu.Unlock()
			c.logger.Error("courier may not list or watch "+what+", so that kind is not reloaded (nothing else waits for it; courier_custom_kind_watch_forbidden is 1): "+fix, zap.Error(err))
			return
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}
}

// servedKind reads the kind, and the version to watch, from r's CRD: the
// storage version if it is served, else the first served one. A CRD not
// yet established serves nothing.
func servedKind(r workload.Resource, obj any) (workload.Custom, bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return workload.Custom{}, false
	}
	established := false
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, cond := range conditions {
		if m, ok := cond.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			established = true
		}
	}
	kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	version := ""
	for _, v := range versions {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		if m["served"] != true {
			continue
		}
		if m["storage"] == true || version == "" {
			version = name
		}
	}
	if !established || kind == "" || version == "" {
		return workload.Custom{}, false
	}
	return workload.Custom{Resource: r, Version: version, Kind: kind}, true
}

// trimCRD keeps of a CustomResourceDefinition what servedKind reads: a
// Rollout's CRD is over 500 KB of schema.
func trimCRD(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetName(u.GetName())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	if kind, ok, _ := unstructured.NestedString(u.Object, "spec", "names", "kind"); ok {
		_ = unstructured.SetNestedField(out.Object, kind, "spec", "names", "kind")
	}
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	var kept []any
	for _, v := range versions {
		if m, ok := v.(map[string]any); ok {
			kept = append(kept, map[string]any{"name": m["name"], "served": m["served"], "storage": m["storage"]})
		}
	}
	if err := unstructured.SetNestedSlice(out.Object, kept, "spec", "versions"); err != nil {
		return nil, fmt.Errorf("trim CRD %s: %w", u.GetName(), err)
	}
	if conditions, ok, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); ok {
		_ = unstructured.SetNestedSlice(out.Object, conditions, "status", "conditions")
	}
	return out, nil
}

// CustomIndexers are the indexers the informer of custom kind r gets.
func CustomIndexers(r workload.Resource) cache.Indexers {
	indexers := cache.Indexers{ConsumersByInput: indexConsumersByInput}
	if r.HasTemplate() {
		indexers[RolloutsByWorkloadRef] = indexByWorkloadRef
	}
	return indexers
}

func indexByWorkloadRef(obj any) ([]string, error) {
	obj = Unwrap(obj)
	if o, ok := obj.(*workload.Object); ok && o.WorkloadRef != "" {
		return []string{o.GetNamespace() + "/" + o.WorkloadRef}, nil
	}
	return nil, nil
}
