package replicator

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/globs"
	"github.com/courier-k8s/courier/internal/namespaces"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/view"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workers"
	"github.com/courier-k8s/courier/internal/writer"
)

// Options configures the replicator.
type Options struct {
	// Installation names this courier installation on the replicas it
	// makes: the namespace it runs in. Another installation's replicas are
	// never touched.
	Installation      string
	SourceNamespaces  globs.List
	ExcludeNamespaces globs.List
	// Workers is how many pairs are synced, and so written, at once.
	Workers int
	// QueueMetrics, if set, receives the work queue's metrics.
	QueueMetrics workqueue.MetricsProvider
	// Guard, if set, is consulted about protected sources and reverts.
	Guard Guard
	// Compat says which other tools' annotations make sources (--compat).
	Compat source.Compat
	// Clock is the replicator's time (nil: the real clock).
	Clock clock.WithTicker
	// ScopeLabels are the label keys of --resource-label-selector: a
	// replica carries its source's values of them (source.Record.With).
	ScopeLabels []string
	// View is what courier sees (zero: everything): a source missing from
	// the cache deletes its replicas, and another source's replica is taken
	// over, only when the view says it is gone.
	View view.View
	// Finder reads by name what the view cannot judge from the cache.
	Finder view.Finder
	// Contents reads what the cache holds the metadata of only (a source's
	// values, a pull's digests); nil: the cache holds every content.
	Contents *informers.Contents
	// Clusters, if set, are the clusters courier replicates into
	// (courier.dev/replicate-to-clusters; remote.go).
	Clusters *informers.Remotes
	// ClusterName is this cluster's name on the replicas courier writes
	// into other clusters (courier.dev/source-cluster).
	ClusterName string
}

// Guard is what the replicator asks the guard (package guard).
type Guard interface {
	// BackupOf names the source m is the backup of, if it is one: its
	// going changes what Restoring says.
	BackupOf(m metav1.Object) (source string, ok bool)
	// Restoring reports whether a protected source that is gone or being
	// deleted is to be restored: its replicas are kept meanwhile.
	Restoring(kind, namespace, name string) bool
	// Allow is asked before reverting someone else's change to a replica: 0
	// to go ahead, else how long to hold off and whether that starts a new
	// backoff.
	Allow(kind, replica string) (wait time.Duration, newlyContested bool)
	// Reverted records a revert that was written.
	Reverted(kind, replica string)
	// Forget drops what is kept about a replica that is gone or no longer wanted.
	Forget(kind, replica string)
}

// A namespace is flapping when its labels change again within flapWindow of
// the previous change. Its replicas are then created or deleted only once
// its labels have held still for flapSettle: a label that flips a hundred
// times a second costs each source a write or two, not a hundred.
const (
	flapWindow = time.Second
	flapSettle = 250 * time.Millisecond
)

// Controller is the replicator.
type Controller struct {
	opts       Options
	roles      role.Config
	logger     *zap.Logger
	recorder   record.EventRecorder
	objects    map[string]*objects
	writer     *writer.Writer
	namespaces cache.Store // namespaces.Namespace
	synced     []cache.InformerSynced
	queue      *workers.Queue[key]
	metrics    *replicatorMetrics
	states     *states
	conflicts  conflicts
	clock      clock.WithTicker

	mu        sync.Mutex
	hashes    map[types.UID]cachedHash // source content hashes by UID, valid for one resourceVersion
	told      map[types.UID]string     // what was last told of each object (a PullRefused, a SourceOutOfView: tellOnce)
	relabeled map[string]relabel       // label changes by namespace
}

type relabel struct {
	last     time.Time // the latest label change seen
	flapping bool      // it came within flapWindow of the one before
}

type cachedHash struct{ resourceVersion, hash string }

// New builds the replicator and registers its handlers on the Secret,
// ConfigMap and Namespace informers, which must not be started yet.
func New(client kubernetes.Interface, secrets, configMaps, namespaces cache.SharedIndexInformer, recorder record.EventRecorder, reg prometheus.Registerer, logger *zap.Logger, o Options) (*Controller, error) {
	if o.Workers < 1 {
		return nil, fmt.Errorf("replicator: Workers must be at least 1, got %d", o.Workers)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	st := newStates()
	c := &Controller{
		opts:     o,
		roles:    role.Config{Compat: o.Compat, Allowed: o.SourceNamespaces.Match, Namespace: o.Installation},
		logger:   logger.Named("replicator"),
		recorder: recorder,
		writer:   writer.New(client, o.ScopeLabels),
		objects: map[string]*objects{
			kindSecret:    newSecrets(secrets.GetIndexer()),
			kindConfigMap: newConfigMaps(configMaps.GetIndexer()),
		},
		namespaces: namespaces.GetStore(),
		synced:     []cache.InformerSynced{secrets.HasSynced, configMaps.HasSynced, namespaces.HasSynced},
		// Backoff per key: 100 ms doubling to 5 min. A failing namespace
		// retries on its own schedule without holding up the others.
		queue:     workers.NewQueue("replicator", workqueue.NewTypedItemExponentialFailureRateLimiter[key](100*time.Millisecond, 5*time.Minute), o.QueueMetrics, o.Clock),
		metrics:   newMetrics(reg, st),
		states:    st,
		clock:     o.Clock,
		conflicts: conflicts{pending: map[key]*conflictBatch{}},
		hashes:    map[types.UID]cachedHash{},
		told:      map[types.UID]string{},
		relabeled: map[string]relabel{},
	}
	if o.Clusters != nil {
		// Not waited for: a cluster Secret listed later is told as it comes
		// (ClusterChanged), and none holds up this cluster's replicas.
		o.Clusters.Handle(c)
	}
	for kind, inf := range map[string]cache.SharedIndexInformer{kindSecret: secrets, kindConfigMap: configMaps} {
		if _, err := inf.AddEventHandler(c.contentHandler(kind)); err != nil {
			return nil, fmt.Errorf("replicator: %s handler: %w", kind, err)
		}
	}
	if _, err := namespaces.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onNamespaceAdd,
		UpdateFunc: c.onNamespaceUpdate,
		DeleteFunc: c.onNamespaceDelete,
	}); err != nil {
		return nil, fmt.Errorf("replicator: namespace handler: %w", err)
	}
	return c, nil
}

// Busy reports whether the replicator has writes still to make: keys wait
// or are being synced (the reloader holds rollouts back meanwhile).
func (c *Controller) Busy() bool { return c.queue.Busy() }

// Run syncs while this process leads, until ctx ends; it may be called again
// for the next term (see package workers).
func (c *Controller) Run(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	if !cache.WaitForNamedCacheSync("replicator", ctx.Done(), c.synced...) {
		return nil // ctx ended first
	}
	c.logger.Info("running", zap.Int("workers", c.opts.Workers))
	c.queue.Run(ctx, c.opts.Workers, key{}, c.resync, c.sync, c.syncFailed)
	// The term is over: the replica states were this term's, and a process
	// that no longer leads reports none (the next term's resync finds them
	// again).
	c.states.reset()
	return nil
}

// resync starts a term: every allowed source, and every source a replica
// names (a source deleted while no one led), fans out from the cache.
func (c *Controller) resync() {
	for kind, o := range c.objects {
		for _, name := range o.indexer.ListIndexFuncValues(informers.SourcesByName) {
			srcs, _ := o.byIndex(informers.SourcesByName, name)
			for _, s := range srcs {
				c.queue.Add(key{Kind: kind, Namespace: s.meta.GetNamespace(), Name: name}, time.Time{})
			}
		}
		for _, ref := range o.indexer.ListIndexFuncValues(informers.PullsBySource) {
			pulls, _ := o.byIndex(informers.PullsBySource, ref)
			for _, p := range pulls {
				c.queue.Add(key{Kind: kind, Namespace: p.meta.GetNamespace(), Name: p.meta.GetName(), Pull: true}, time.Time{})
			}
		}
		for _, ref := range o.indexer.ListIndexFuncValues(informers.ReplicasBySource) {
			if ns, name, err := cache.SplitMetaNamespaceKey(ref); err == nil && ns != "" {
				c.queue.Add(key{Kind: kind, Namespace: ns, Name: name}, time.Time{})
			}
		}
	}
	c.resyncClusters()
}

func (c *Controller) sync(ctx context.Context, k key) error {
	if k.Kind == "" {
		return c.syncCluster(k)
	}
	if k.Pull {
		return c.syncPull(ctx, k)
	}
	if k.Target == "" {
		return c.syncSource(ctx, k)
	}
	return c.syncPair(ctx, k)
}

func (c *Controller) syncFailed(k key, err error) {
	if isQuiet(err) {
		c.logger.Debug("retrying after a concurrent change", zap.Stringer("key", k), zap.Error(err))
		return
	}
	c.metrics.syncErrors.WithLabelValues(k.Kind).Inc()
	c.logger.Error("sync failed; retrying with backoff", zap.Stringer("key", k), zap.Error(err),
		zap.Int("retries", c.queue.NumRequeues(k)))
	if k.Target != "" || k.Pull {
		c.failed(k, err)
	}
}

// hash is the content hash of what a source's replicas hold (spec says
// which keys: it is read from the same version of the source), computed once
// per resourceVersion.
func (c *Controller) hash(src *item, spec source.Spec) string {
	uid, rv := src.meta.GetUID(), src.meta.GetResourceVersion()
	c.mu.Lock()
	h, ok := c.hashes[uid]
	c.mu.Unlock()
	if ok && h.resourceVersion == rv {
		return h.hash
	}
	sum := content.Hash(spec.Entries(src.entries()))
	c.mu.Lock()
	c.hashes[uid] = cachedHash{rv, sum}
	c.mu.Unlock()
	return sum
}

// enqueue adds k, remembering when the change it waits for was seen (the
// earliest, if k is already waiting).
func (c *Controller) enqueue(k key, seen time.Time) { c.queue.Add(k, seen) }

// forgetSource drops what is kept about a source that is gone.
func (c *Controller) forgetSource(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.hashes, uid)
}

// contentHandler maps Secret or ConfigMap events to keys: the object's own
// source key when it is (or was) a source, and the pairs of every source
// with its name for its namespace (it may be their replica, or stand in
// their way).
func (c *Controller) contentHandler(kind string) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			m, err := meta.Accessor(obj)
			if err != nil {
				return
			}
			if c.isSourceMeta(m) {
				c.sourceChanged(kind, m)
			}
			c.enqueueClaims(kind, m, true)
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, err1 := meta.Accessor(oldObj)
			cur, err2 := meta.Accessor(newObj)
			if err1 != nil || err2 != nil || old.GetResourceVersion() == cur.GetResourceVersion() {
				return
			}
			if c.isSourceMeta(old) || c.isSourceMeta(cur) {
				if c.sourceRelevantChange(oldObj, newObj) {
					c.sourceChanged(kind, cur)
				}
			}
			// Its pullers look again only if it lets them pull (or did): a
			// refused pull's cause does not change with the source's content.
			c.enqueueClaims(kind, cur, c.allowsPulls(old) || c.allowsPulls(cur))
		},
		DeleteFunc: func(obj any) {
			obj = informers.Unwrap(obj)
			m, err := meta.Accessor(obj)
			if err != nil {
				return
			}
			if c.opts.Guard != nil {
				if of, ok := c.opts.Guard.BackupOf(m); ok {
					// A protected source's backup is gone: whether its
					// replicas are kept (Guard.Restoring) may have changed.
					c.enqueue(key{Kind: kind, Namespace: m.GetNamespace(), Name: of}, c.clock.Now())
				}
			}
			if c.isSourceMeta(m) {
				c.forgetSource(m.GetUID())
				c.sourceChanged(kind, m)
			}
			c.forgetTold(m.GetUID())
			c.enqueueClaims(kind, m, true)
		},
	}
}

// isSourceMeta reports whether m's annotations ask for replicas.
func (c *Controller) isSourceMeta(m metav1.Object) bool {
	return role.Of(m, "", c.roles).Pushes // a push does not depend on the type
}

// allowsPulls reports whether m's annotations let objects pull from it.
func (c *Controller) allowsPulls(m metav1.Object) bool { return role.Of(m, "", c.roles).AllowsPulls }

// roleOf is what it is to courier (package role).
func (c *Controller) roleOf(it *item) role.Role { return role.Of(it.meta, it.typ, c.roles) }

func (c *Controller) sourceChanged(kind string, m metav1.Object) {
	c.enqueue(key{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()}, c.clock.Now())
}

// sourceRelevantChange reports whether an update can change any replica:
// content, type, immutable, or courier's annotations and labels.
func (c *Controller) sourceRelevantChange(oldObj, newObj any) bool {
	switch o := oldObj.(type) {
	case *corev1.Secret:
		n, ok := newObj.(*corev1.Secret)
		return !ok || o.Type != n.Type || !equality.Semantic.DeepEqual(o.Data, n.Data) || !equality.Semantic.DeepEqual(o.Immutable, n.Immutable) ||
			c.courierMetaChanged(o, n)
	case *corev1.ConfigMap:
		n, ok := newObj.(*corev1.ConfigMap)
		return !ok || !equality.Semantic.DeepEqual(o.Data, n.Data) || !equality.Semantic.DeepEqual(o.BinaryData, n.BinaryData) ||
			!equality.Semantic.DeepEqual(o.Immutable, n.Immutable) || c.courierMetaChanged(o, n)
	case *content.Digested:
		// Digested both times, or its values kept now (it became a source).
		n, ok := newObj.(*content.Digested)
		return !ok || !o.SameContent(n) || c.courierMetaChanged(o, n)
	}
	return true
}

// copied is what a replica of a source with these labels and annotations
// carries of them.
func (c *Controller) copied(spec source.Spec, labels, annotations map[string]string) source.Record {
	return spec.Copied(labels, annotations).With(labels, c.opts.ScopeLabels)
}

func (c *Controller) courierMetaChanged(o, n metav1.Object) bool {
	oa, na := o.GetAnnotations(), n.GetAnnotations()
	for _, k := range sourceKeys {
		if oa[k] != na[k] {
			return true
		}
	}
	if spec, err := source.Parse(na); err == nil && c.copied(spec, o.GetLabels(), oa).Encode() != c.copied(spec, n.GetLabels(), na).Encode() {
		return true // a copied label or annotation changed
	}
	return o.GetLabels()[wellknown.Protect] != n.GetLabels()[wellknown.Protect] ||
		o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero()
}

// enqueueClaims enqueues the pair of every source named like m for m's
// namespace, and of the source m names as its own, if any; and m's pull,
// and with pullers the pulls from m.
func (c *Controller) enqueueClaims(kind string, m metav1.Object, pullers bool) {
	now := c.clock.Now()
	ns := m.GetNamespace()
	if src, ok := m.GetAnnotations()[wellknown.Source]; ok {
		if srcNS, name, err := cache.SplitMetaNamespaceKey(src); err == nil && srcNS != "" {
			c.enqueue(key{Kind: kind, Namespace: srcNS, Name: name, Target: ns}, now)
		}
	}
	c.enqueueSourcesNamed(kind, m.GetName(), ns, now)
	c.enqueuePulls(kind, m, pullers, now)
}

// enqueueAllSourcesFor enqueues the pair of every source for namespace ns.
// Sources are few next to objects; this never scans Secrets or ConfigMaps.
func (c *Controller) enqueueAllSourcesFor(ns string) {
	now := c.clock.Now()
	for kind, o := range c.objects {
		for _, name := range o.indexer.ListIndexFuncValues(informers.SourcesByName) {
			c.enqueueSourcesNamed(kind, name, ns, now)
		}
	}
}

// enqueueSourcesNamed enqueues the pair (source, ns) of every source of kind
// called name outside ns.
func (c *Controller) enqueueSourcesNamed(kind, name, ns string, seen time.Time) {
	srcs, err := c.objects[kind].byIndex(informers.SourcesByName, name)
	if err != nil {
		return
	}
	for _, s := range srcs {
		if s.meta.GetNamespace() != ns {
			c.enqueue(key{Kind: kind, Namespace: s.meta.GetNamespace(), Name: name, Target: ns}, seen)
		}
	}
}

// nsOf is the namespace an event is about.
func nsOf(obj any) (*namespaces.Namespace, bool) { return namespaces.Of(informers.Unwrap(obj)) }

func (c *Controller) onNamespaceAdd(obj any) {
	if ns, ok := nsOf(obj); ok {
		c.enqueueAllSourcesFor(ns.GetName())
	}
}

func (c *Controller) onNamespaceUpdate(oldObj, newObj any) {
	o, ok1 := nsOf(oldObj)
	n, ok2 := nsOf(newObj)
	if !ok1 || !ok2 {
		return
	}
	relabeled := !maps.Equal(o.GetLabels(), n.GetLabels())
	if !relabeled && namespaces.Terminating(o) == namespaces.Terminating(n) {
		return
	}
	if relabeled {
		now := c.clock.Now()
		c.mu.Lock()
		prev, seen := c.relabeled[n.GetName()]
		c.relabeled[n.GetName()] = relabel{last: now, flapping: seen && now.Sub(prev.last) < flapWindow}
		c.mu.Unlock()
		c.enqueuePullsIn(n.GetName())
	}
	c.enqueueAllSourcesFor(n.GetName())
}

// enqueuePullsIn enqueues every pull whose object is in namespace ns: a
// source may allow pulls by the namespace's labels (Reflector's selector).
func (c *Controller) enqueuePullsIn(ns string) {
	now := c.clock.Now()
	for kind, o := range c.objects {
		for _, ref := range o.indexer.ListIndexFuncValues(informers.PullsBySource) {
			pulls, _ := o.byIndex(informers.PullsBySource, ref)
			for _, p := range pulls {
				if p.meta.GetNamespace() == ns {
					c.enqueue(key{Kind: kind, Namespace: ns, Name: p.meta.GetName(), Pull: true}, now)
				}
			}
		}
	}
}

// flapHold is how long replicas in ns must wait before being created or
// deleted: while its labels flap, until they have held still for flapSettle.
func (c *Controller) flapHold(ns string) time.Duration {
	c.mu.Lock()
	r := c.relabeled[ns]
	c.mu.Unlock()
	if !r.flapping {
		return 0
	}
	return max(0, r.last.Add(flapSettle).Sub(c.clock.Now()))
}

// NamespaceAvailable is told of a watched namespace that courier's caches
// speak for again (informers.Set.OnAvailable): the pairs into it that
// waited (errUnavailable) go on now.
func (c *Controller) NamespaceAvailable(ns string) { c.enqueueAllSourcesFor(ns) }

func (c *Controller) onNamespaceDelete(obj any) {
	if ns, ok := nsOf(obj); ok {
		c.mu.Lock()
		delete(c.relabeled, ns.GetName())
		c.mu.Unlock()
		c.enqueueAllSourcesFor(ns.GetName()) // the pairs find the namespace gone and forget their state
	}
}

// sourceKeys are the annotations whose change can change a source's replicas.
var sourceKeys = []string{
	wellknown.ReplicateTo, wellknown.ReplicateToClusters, wellknown.ReplicateKeys, wellknown.CopyLabels, wellknown.CopyAnnotations,
	source.MittwaldReplicateTo, source.MittwaldReplicateToMatching, source.MittwaldAllowed, source.MittwaldAllowedNamespaces,
	source.ReflectorAllowed, source.ReflectorAllowedNamespaces, source.ReflectorAutoEnabled, source.ReflectorAutoNamespaces,
	source.ReflectorAllowedSelector, source.ReflectorAutoSelector,
}
