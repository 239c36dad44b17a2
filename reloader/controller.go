package reloader

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/notify"
	"github.com/courier-k8s/courier/internal/stakater"
	"github.com/courier-k8s/courier/internal/view"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workers"
	"github.com/courier-k8s/courier/internal/workload"
)

// workerCount workloads are synced concurrently; rollouts are paced by the limiter.
const workerCount = 64

// Options configures the reloader.
type Options struct {
	// Namespace is courier's own: the digest key lives there (KeySecret).
	Namespace string
	// View is what courier sees (zero: everything): an input in a
	// workload's baseline that the cache lacks counts as missing, and an
	// installation whose digest key it lacks as gone, only when the view
	// says so; under a selector (View.Selective) an input never seen holds
	// no rollout back (observed).
	View view.View
	// Finder reads by name what the view cannot judge from the cache.
	Finder view.Finder
	// KeyLabels are labels the selector selects (config.SatisfyingLabels),
	// given to the digest key so courier sees it.
	KeyLabels map[string]string
	// ReloadAll reloads consumers of any change, without opt-in annotations.
	ReloadAll bool
	// StormChanges and StormWindow are the circuit breaker per input: more
	// than StormChanges content changes within StormWindow stop the input
	// causing rollouts until it is quiet for StormWindow (0: no breaker).
	StormChanges int
	StormWindow  time.Duration
	// NotifyOnly: no workload is rolled out; each rollout courier would
	// make is an Event and a notification instead (--reload-mode=notify).
	NotifyOnly bool
	// Compat honours Stakater Reloader's annotations too (--compat=reloader).
	Compat bool
	// Debounce gathers the changes to one workload's inputs into one rollout.
	Debounce time.Duration
	// WaveTimeout: a workload of an earlier rollout wave not healthy this
	// long after courier rolled it out halts the change for the later
	// waves (--reload-wave-timeout).
	WaveTimeout time.Duration
	// MaxInFlight: at most this many rollouts courier started and not yet
	// healthy at any moment, cluster-wide (0: no limit;
	// --reload-max-in-flight).
	MaxInFlight int
	// QPS and Burst bound rollouts across the cluster.
	QPS   float32
	Burst int
	// QueueMetrics, if set, receives the work queue's metrics.
	QueueMetrics workqueue.MetricsProvider
	// Dynamic patches the custom kinds (--reload-resources); it may be nil
	// when there are none.
	Dynamic dynamic.Interface
	// Pending, if set, reports whether a kind that may take a Deployment's
	// pod template (Argo Rollouts' workloadRef) is listed but not yet known
	// in full: Deployments wait, so one held by a Rollout is never reloaded
	// on its own.
	Pending func() bool
	// Replicating, if set, reports whether the replicator has writes still
	// to make: a rollout waits for them (ReplicationWait), so a source
	// change reaches every namespace at the API server's full pace before
	// the workloads consuming it roll, rather than competing with the
	// rollouts (and the ReplicaSets they make) for the API server.
	Replicating func() bool
	// ProviderStatuses, if set, is the informer of the Secrets Store CSI
	// driver's SecretProviderClassPodStatus objects (--reload-csi).
	ProviderStatuses cache.SharedIndexInformer
	// Notifier, if set, is told of every rollout (--notify-url).
	Notifier *notify.Notifier
	// Clock is the reloader's time (nil: the real clock).
	Clock clock.WithTicker
	// Read reads a Secret or ConfigMap by name as the caches see them (their
	// selectors), values included, or nil when there is none: an input the
	// cache holds the metadata of only (informers.Reader).
	Read func(ctx context.Context, kind, namespace, name string) (runtime.Object, error)
	// ReadAt reads one as it was at a resourceVersion (nil: never).
	ReadAt func(ctx context.Context, kind, namespace, name, version string) (runtime.Object, error)
	// ExistedAt reports whether the object uid of resource gvr was there
	// at a resourceVersion (nil: taken as there; informers.Finder).
	ExistedAt func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, uid types.UID, version string) (bool, error)
}

// Controller is the reloader.
type Controller struct {
	opts       Options
	client     kubernetes.Interface
	logger     *zap.Logger
	recorder   record.EventRecorder
	secrets    cache.Indexer
	configMaps cache.Indexer
	synced     []cache.InformerSynced
	queue      *workers.Queue[key]
	limiter    flowcontrol.RateLimiter
	metrics    *reloaderMetrics
	storms     *storms

	kindsMu sync.RWMutex
	kinds   map[string]kindInfo // by kind name: the built-in kinds, and the custom kinds served now

	parked  parked   // workloads waiting for the replicator
	waiting *waiting // workloads waiting for an earlier rollout wave or a slot
	budget  *budget  // --reload-max-in-flight

	// hints: the content inputs had before their latest change, by input
	// key (see hint); templates: for workloads whose inputs changed lately,
	// their pod template when the last of those changes was seen, by UID
	// (see ownRollout, debouncing). Both live hintTTL at most.
	hints     *expiring[string, hint]
	templates *expiring[types.UID, templateAt]

	mu      sync.Mutex
	entries map[types.UID]cachedEntries // per-key digests of objects holding values, by UID
	// providerStatuses: the Secrets Store CSI driver's reports (nil
	// without --reload-csi); providers: per class (InputKey), the report
	// that set its content (classState), while reports on it exist or
	// workloads consume it.
	providerStatuses cache.Indexer
	providersSynced  cache.InformerSynced
	providers        map[string]*unstructured.Unstructured
	// pendingJobs: Jobs deleted to be recreated (see recreate) whose
	// create has not succeeded yet, until it does or another Job takes the
	// name.
	pendingJobs map[key]pendingJob
	// lost: rollouts whose write failed and may have been made all the
	// same, by workload UID (see unansweredRollout). Rollouts are kept
	// across terms, until the workload goes: one whose answer was lost as
	// the term ended (the API server away) is told when this process leads
	// again, unless another leader made it meanwhile (madeAfterAll).
	// Several, while the cache lags: a write against the version a failed
	// one was made against conflicts if that one was made, so at most one
	// of them was.
	lost map[types.UID][]unansweredRollout
}

// New builds the reloader and registers its handlers on the informers (not
// yet started): workloads by kind (one of workload.Kinds), Secrets and
// ConfigMaps.
func New(client kubernetes.Interface, workloads map[string]cache.SharedIndexInformer, secrets, configMaps cache.SharedIndexInformer, recorder record.EventRecorder, reg prometheus.Registerer, logger *zap.Logger, o Options) (*Controller, error) {
	if o.QPS <= 0 || o.Burst < 1 {
		return nil, fmt.Errorf("reloader: QPS and Burst must be positive")
	}
	c := newController(client, recorder, reg, logger, o)
	c.secrets, c.configMaps = secrets.GetIndexer(), configMaps.GetIndexer()
	c.synced = []cache.InformerSynced{secrets.HasSynced, configMaps.HasSynced}
	for _, kind := range workload.Kinds {
		i, ok := workloads[kind]
		if !ok {
			return nil, fmt.Errorf("reloader: no %s informer", kind)
		}
		c.kinds[kind] = kindInfo{indexer: i.GetIndexer(), hashPath: workload.HashPath(kind)}
		c.synced = append(c.synced, i.HasSynced)
	}
	// The handlers once every kind is known: they read c.kinds (kindList),
	// which is not changed in place from here on.
	for _, kind := range workload.Kinds {
		if _, err := workloads[kind].AddEventHandler(c.workloadHandler()); err != nil {
			return nil, fmt.Errorf("reloader: %s handler: %w", kind, err)
		}
	}
	for kind, i := range map[string]cache.SharedIndexInformer{wellknown.KindSecret: secrets, wellknown.KindConfigMap: configMaps} {
		if _, err := i.AddEventHandler(c.inputHandler(kind, i.GetIndexer())); err != nil {
			return nil, fmt.Errorf("reloader: %s handler: %w", kind, err)
		}
	}
	if o.ProviderStatuses != nil {
		c.providerStatuses, c.providersSynced = o.ProviderStatuses.GetIndexer(), o.ProviderStatuses.HasSynced
		if _, err := o.ProviderStatuses.AddEventHandler(c.providerHandler()); err != nil {
			return nil, fmt.Errorf("reloader: SecretProviderClassPodStatus handler: %w", err)
		}
	}
	return c, nil
}

// newController is the reloader with no caches yet and its per-process
// state empty: what New and Preview start from.
func newController(client kubernetes.Interface, recorder record.EventRecorder, reg prometheus.Registerer, logger *zap.Logger, o Options) *Controller {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Controller{
		opts:     o,
		client:   client,
		logger:   logger.Named("reloader"),
		recorder: recorder,
		kinds:    map[string]kindInfo{},
		// Backoff per workload: 200 ms doubling to 5 min.
		queue:       workers.NewQueue("reloader", workqueue.NewTypedItemExponentialFailureRateLimiter[key](200*time.Millisecond, 5*time.Minute), o.QueueMetrics, o.Clock),
		limiter:     flowcontrol.NewTokenBucketRateLimiterWithClock(o.QPS, o.Burst, o.Clock),
		metrics:     newMetrics(reg),
		storms:      newStorms(o.StormChanges, o.StormWindow, o.Debounce, o.Clock.Now),
		entries:     map[types.UID]cachedEntries{},
		hints:       newExpiring[string, hint](hintTTL(o.Debounce), o.Clock.Now),
		templates:   newExpiring[types.UID, templateAt](hintTTL(o.Debounce), o.Clock.Now),
		pendingJobs: map[key]pendingJob{},
		lost:        map[types.UID][]unansweredRollout{},
		providers:   map[string]*unstructured.Unstructured{},
	}
	reg.MustRegister(c.storms)
	c.waiting, c.budget = newWaiting(reg), newBudget(o.MaxInFlight, reg)
	return c
}

// Run syncs while this process leads, until ctx ends; it may be called again
// for the next term (see package workers).
func (c *Controller) Run(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	if !cache.WaitForNamedCacheSync("reloader", ctx.Done(), c.synced...) {
		return nil
	}
	if err := c.ensureKey(ctx); err != nil && ctx.Err() == nil {
		c.logger.Error("no digest key: workloads are not reloaded until it exists", zap.Error(err))
	}
	c.queue.Run(ctx, workerCount, key{}, c.resync, c.sync, c.failed)
	c.forgetNotifyOnly()
	c.waiting.reset()
	c.budget.reset()
	return nil
}

// resync starts a term: every workload is compared with its baseline, and
// Jobs deleted to be recreated but not created yet are tried again.
func (c *Controller) resync() {
	c.mu.Lock()
	for k := range c.pendingJobs {
		c.queue.Add(k, time.Time{})
	}
	c.mu.Unlock()
	for kind, info := range c.kindList() {
		for _, k := range info.indexer.ListKeys() {
			if ns, name, err := cache.SplitMetaNamespaceKey(k); err == nil {
				c.queue.Add(key{Kind: kind, Namespace: ns, Name: name}, time.Time{})
			}
		}
	}
}

func (c *Controller) failed(k key, err error) {
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) || errors.Is(err, errPending) {
		return // the workload changed (or went) since the cache saw it: look again
	}
	if apierrors.IsForbidden(err) && k.Kind == workload.Job {
		c.logger.Error("courier may not recreate this Job; grant get, create and delete on jobs to courier's ServiceAccount (manifests/ and the chart do); retrying with backoff", zap.Stringer("workload", k), zap.Error(err))
		return
	}
	if apierrors.IsForbidden(err) {
		c.logger.Error("courier may not patch this workload; grant patch on its kind to courier's ServiceAccount (a --reload-resources kind: docs/reload.md, Argo Rollouts and custom resources); retrying with backoff", zap.Stringer("workload", k), zap.Error(err))
		return
	}
	c.logger.Error("sync failed; retrying with backoff", zap.Stringer("workload", k), zap.Error(err))
}

// changed enqueues k after the debounce window, remembering when the change
// was first seen. A key already waiting keeps its earlier time, so changes
// within the window share one sync.
func (c *Controller) changed(k key) {
	c.queue.AddAfter(k, c.opts.Debounce, c.opts.Clock.Now())
}

func workloadKey(obj any) (key, bool) {
	m, err := meta.Accessor(obj)
	kind := workload.KindOf(obj)
	if err != nil || kind == "" {
		return key{}, false
	}
	return key{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()}, true
}

func (c *Controller) workloadHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onWorkload,
		UpdateFunc: c.onWorkloadUpdate,
		DeleteFunc: c.onWorkloadDelete,
	}
}

// onWorkload handles a workload seen for the first time (or on start-up).
func (c *Controller) onWorkload(obj any) {
	c.observeBudget(obj, false)
	c.enqueueWorkload(obj)
}

// enqueueWorkload syncs workload obj, and the Rollouts taking their pod
// template from it.
func (c *Controller) enqueueWorkload(obj any) {
	if k, ok := workloadKey(obj); ok {
		c.queue.Add(k, time.Time{})
		for _, r := range c.referencing(k) {
			c.queue.Add(r, time.Time{})
		}
	}
}

// referencing is the Rollouts that take their pod template from k, a
// Deployment (spec.workloadRef).
func (c *Controller) referencing(k key) []key {
	if k.Kind != workload.Deployment {
		return nil
	}
	rollouts, ok := c.kind(workload.Rollout)
	if !ok {
		return nil
	}
	objs, _ := rollouts.indexer.ByIndex(informers.RolloutsByWorkloadRef, k.Namespace+"/"+k.Name)
	out := make([]key, 0, len(objs))
	for _, o := range objs {
		if m, err := meta.Accessor(o); err == nil {
			out = append(out, key{Kind: workload.Rollout, Namespace: m.GetNamespace(), Name: m.GetName()})
		}
	}
	return out
}

// onWorkloadUpdate looks again only when what the reloader reads changed:
// the pod template's inputs or courier's annotations.
func (c *Controller) onWorkloadUpdate(oldObj, newObj any) {
	om, err1 := meta.Accessor(oldObj)
	nm, err2 := meta.Accessor(newObj)
	if err1 != nil || err2 != nil {
		return
	}
	c.observeBudget(newObj, false)
	c.templateChangedFirst(oldObj, newObj)
	a, b := om.GetAnnotations(), nm.GetAnnotations()
	if k, ok := workloadKey(newObj); ok && (workload.HealthOf(oldObj) != workload.HealthOf(newObj) || om.GetGeneration() != nm.GetGeneration() ||
		a[wellknown.ConfigInputs] != b[wellknown.ConfigInputs] || a[wellknown.ReloadWave] != b[wellknown.ReloadWave]) {
		// A workload of an earlier wave moved on (or, for a Deployment,
		// the Rollouts taking its template): those waiting look again.
		c.wake(k)
		for _, r := range c.referencing(k) {
			c.wake(r)
		}
	}
	if equality.Semantic.DeepEqual(workload.Inputs(oldObj), workload.Inputs(newObj)) && workload.RefOf(oldObj) == workload.RefOf(newObj) &&
		a[wellknown.Reload] == b[wellknown.Reload] && a[wellknown.ReloadOn] == b[wellknown.ReloadOn] && a[wellknown.ConfigInputs] == b[wellknown.ConfigInputs] &&
		a[wellknown.ReloadMinInterval] == b[wellknown.ReloadMinInterval] && a[stakater.PausePeriod] == b[stakater.PausePeriod] &&
		a[wellknown.ReloadFinished] == b[wellknown.ReloadFinished] && a[wellknown.ReloadWave] == b[wellknown.ReloadWave] &&
		!(c.opts.Compat && (changed(a, b, stakater.Keys) || changed(workload.TemplateAnnotations(oldObj), workload.TemplateAnnotations(newObj), stakater.Keys))) {
		return
	}
	c.enqueueWorkload(newObj)
}

func (c *Controller) onWorkloadDelete(obj any) {
	obj = informers.Unwrap(obj)
	c.observeBudget(obj, true)
	if k, ok := workloadKey(obj); ok {
		c.queue.Take(k)
		c.wake(k)
		c.waiting.set(k, time.Time{}, time.Time{}, verdict{})
	}
	if m, err := meta.Accessor(obj); err == nil {
		c.forgetTemplate(m.GetUID())
		c.forgetLost(m.GetUID())
	}
}

// enqueueConsumers queues the workloads consuming input ik (an InputKey)
// for a sync after the debounce window; contentChanged: its consumed
// content may have changed, in the write of resourceVersion version (see
// rememberTemplate).
func (c *Controller) enqueueConsumers(ik string, contentChanged bool, version string) {
	for wkind, info := range c.kindList() {
		objs, err := informers.Consumers(info.indexer, ik)
		if err != nil {
			continue
		}
		for _, o := range objs {
			w, _ := meta.Accessor(o)
			if contentChanged {
				c.rememberTemplate(o, version)
			}
			k := key{Kind: wkind, Namespace: w.GetNamespace(), Name: w.GetName()}
			c.changed(k)
			for _, r := range c.referencing(k) {
				c.changed(r)
			}
		}
	}
}

// inputHandler maps a Secret or ConfigMap event to its consumers, through
// the ConsumersByInput index: only when content or courier.dev/reload changed.
func (c *Controller) inputHandler(kind string, indexer cache.Indexer) cache.ResourceEventHandler {
	enqueueConsumers := func(obj any, contentChanged bool) {
		if m, err := meta.Accessor(obj); err == nil {
			c.enqueueConsumers(informers.InputKey(kind, m.GetNamespace(), m.GetName()), contentChanged, m.GetResourceVersion())
		}
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		// An input created (or re-created) since the start may hold other
		// content than its consumers were given.
		AddFunc: func(obj any, isInInitialList bool) { enqueueConsumers(obj, !isInInitialList) },
		UpdateFunc: func(oldObj, newObj any) {
			om, err1 := meta.Accessor(oldObj)
			nm, err2 := meta.Accessor(newObj)
			if err1 != nil || err2 != nil {
				return
			}
			old := c.held(oldObj)
			if om.GetUID() != nm.GetUID() {
				c.forget(om.GetUID()) // replaced: a relist saw the new one only
			}
			// What was read of an older version stays until the next read:
			// that read tells whether the content changed (inputOf).
			now := c.held(newObj)
			// Content courier does not hold (its metadata only) may have
			// changed with any new resourceVersion: its consumers read it.
			var contentChanged bool
			if old == nil || now == nil {
				contentChanged = om.GetResourceVersion() != nm.GetResourceVersion()
			} else {
				contentChanged = content.Hash(content.Entries(old)) != content.Hash(content.Entries(now))
			}
			reloadChanged := om.GetAnnotations()[wellknown.Reload] != nm.GetAnnotations()[wellknown.Reload] ||
				(c.opts.Compat && changed(om.GetAnnotations(), nm.GetAnnotations(), []string{stakater.Match, stakater.Ignore}))
			if !contentChanged && !reloadChanged {
				return // metadata-only writes and resyncs never reload
			}
			ik := informers.InputKey(kind, nm.GetNamespace(), nm.GetName())
			if contentChanged && old != nil && now != nil && c.consumed(ik) {
				// Counted here when courier holds both contents; else when
				// its consumers read the new one (inputOf).
				c.countChange(ik, newObj, c.opts.Clock.Now())
			}
			oa, na := om.GetAnnotations(), nm.GetAnnotations()
			optedIn := na[wellknown.Reload] == "true" && oa[wellknown.Reload] != "true"
			if c.opts.Compat {
				// Reloader's match given, or its ignore taken away.
				optedIn = optedIn || (na[stakater.Match] == "true" && oa[stakater.Match] != "true") ||
					(oa[stakater.Ignore] == "true" && na[stakater.Ignore] != "true")
			}
			optedInWithChange := contentChanged && optedIn
			if optedInWithChange {
				c.remember(ik, old, om.GetResourceVersion(), nm.GetResourceVersion())
			}
			enqueueConsumers(newObj, contentChanged)
			if reloadChanged {
				// The consumers of its replicas opt in (or out) with it. The
				// replicas in the cache still hold the content from before a
				// change made with the opt-in: that is their hint.
				replicas, _ := indexer.ByIndex(informers.ReplicasBySource, nm.GetNamespace()+"/"+nm.GetName())
				for _, r := range replicas {
					if h := c.held(r); optedInWithChange && h != nil {
						rm, _ := meta.Accessor(r)
						c.remember(informers.InputKey(kind, rm.GetNamespace(), rm.GetName()), h, "", nm.GetResourceVersion())
					}
					enqueueConsumers(r, false)
				}
			}
		},
		DeleteFunc: func(obj any) {
			obj = informers.Unwrap(obj)
			if m, err := meta.Accessor(obj); err == nil {
				c.forget(m.GetUID())
				c.storms.forget(informers.InputKey(kind, m.GetNamespace(), m.GetName()))
			}
			enqueueConsumers(obj, false)
		},
	}
}

// countChange counts a change of the consumed input ik (obj, as cached)
// toward the storm breaker, and says so when it trips it (the leader only).
func (c *Controller) countChange(ik string, obj any, now time.Time) {
	if !c.storms.changed(ik, now) || !c.queue.Open() {
		return
	}
	msg := fmt.Sprintf("changed more than %d times within %s: its changes roll nothing out until it has not changed for %s; then its consumers roll out once, if what they consume differs from what they run (--reload-storm-changes, --reload-storm-window)",
		c.opts.StormChanges, c.opts.StormWindow, c.opts.StormWindow)
	c.logger.Warn("input changing too often: rollouts suppressed", zap.String("input", ik), zap.String("why", msg))
	if o, ok := obj.(runtime.Object); ok {
		c.recorder.Event(o, corev1.EventTypeWarning, wellknown.ReasonReloadSuppressed, msg)
	}
}

// hint is what an input held before a change made together with its
// opt-in (one apply adding courier.dev/reload: "true" and a new value): its
// consumers, which have no baseline yet, are compared with it rather than
// taking the new content as their first baseline, so that change rolls out.
// Only the workloads that consumed the input when the change was seen, and
// existed before it, are its consumers: one created after (even in the same
// second, or on a node whose clock runs ahead, or seen by courier's cache of
// workloads before it saw the change: two watches have no order between
// them) is at its first sight, never rolled out.
type hint struct {
	obj any // the input before the change, digested
	// version is the input's resourceVersion before the change, when
	// courier held only its metadata then: obj is read at that version
	// (Options.ReadAt) when a consumer first needs it.
	version string
	// at is the change's resourceVersion; consumers, the resourceVersion
	// of each workload consuming the input when courier saw the change.
	at        string
	consumers map[types.UID]string
}

// hintTTL is how long a hint (and a template record) is kept: past the
// debounce, every consumer of the change has been synced.
func hintTTL(debounce time.Duration) time.Duration { return 2*debounce + 10*time.Second }

// remember keeps the hint of a change (at: its resourceVersion) of the
// input inputKey: before is what courier held of the input before it
// (held), or nil when it held its metadata only, then version, its
// resourceVersion before the change, is where a consumer reads it
// (previous).
func (c *Controller) remember(inputKey string, before any, version, at string) {
	h := hint{version: version, at: at, consumers: c.consumersNow(inputKey)}
	if before != nil {
		h.obj = content.DigestedCopy(before) // never its values
	}
	c.hints.Set(inputKey, func(hint, bool) hint { return h })
}

// held is a cached Secret or ConfigMap as far as courier holds its content:
// obj itself, or for one the cache holds the metadata of only
// (content.MetadataOnly), what was read of it at its resourceVersion
// (inputOf); nil when courier holds nothing of its content.
func (c *Controller) held(obj any) any {
	if content.Read(obj) {
		return obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[m.GetUID()]; ok && e.read != nil && e.resourceVersion == m.GetResourceVersion() {
		return e.read
	}
	return nil
}

// consumersNow are the workloads in the cache that consume the input now
// (its consumers, and the Rollouts taking their template from one of them),
// each with its resourceVersion.
func (c *Controller) consumersNow(inputKey string) map[types.UID]string {
	out := map[types.UID]string{}
	for kind, info := range c.kindList() {
		objs, _ := informers.Consumers(info.indexer, inputKey)
		for _, o := range objs {
			m, err := meta.Accessor(o)
			if err != nil {
				continue
			}
			out[m.GetUID()] = m.GetResourceVersion()
			for _, r := range c.referencing(key{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()}) {
				if info, ok := c.kind(r.Kind); ok {
					if ro, ok, _ := info.indexer.GetByKey(r.Namespace + "/" + r.Name); ok {
						if rm, err := meta.Accessor(ro); err == nil {
							out[rm.GetUID()] = rm.GetResourceVersion()
						}
					}
				}
			}
		}
	}
	return out
}

// previous is the hint for the input kind/name that changed recently, if
// workload k (its UID uid) consumed it then.
func (c *Controller) previous(ctx context.Context, k key, uid types.UID, kind, name string) (any, bool) {
	namespace := k.Namespace
	ik := informers.InputKey(kind, namespace, name)
	h, _, ok := c.hints.Get(ik)
	if !ok {
		return nil, false
	}
	if v, ok := h.consumers[uid]; !ok || (newerVersion(v, h.at) && !c.existedAt(ctx, k, uid, h.at)) {
		return nil, false
	}
	if h.obj == nil {
		if c.opts.ReadAt == nil || h.version == "" {
			return nil, false
		}
		// One read for every consumer of the change: the input as it was
		// at its version before it (etcd keeps it until compaction, five
		// minutes by default; a read that fails gives no hint).
		c.metrics.reads.Inc()
		obj, err := c.opts.ReadAt(ctx, kind, namespace, name, h.version)
		if err != nil || obj == nil {
			c.logger.Debug("could not read an input as it was before its opt-in", zap.String("input", ik), zap.String("version", h.version), zap.Error(err))
			return nil, false
		}
		h.obj = content.DigestObject(obj, false)
		c.hints.Update(ik, func(old hint) hint {
			if old.version == h.version {
				old.obj = h.obj
			}
			return old
		})
	}
	return h.obj, true
}

// existedAt reports whether workload k (its UID uid), written since the
// version of a change, existed at it: the API server's answer (one list by
// name at that exact version), or, when it cannot give one (the version
// compacted), true, so the change rolls it out rather than miss it.
func (c *Controller) existedAt(ctx context.Context, k key, uid types.UID, version string) bool {
	if c.opts.ExistedAt == nil {
		return true
	}
	gvr, ok := workload.BuiltIn(k.Kind)
	if info, custom := c.kind(k.Kind); custom && info.gvr != nil {
		gvr, ok = *info.gvr, true
	}
	if !ok {
		return true
	}
	existed, err := c.opts.ExistedAt(ctx, gvr, k.Namespace, k.Name, uid, version)
	if err != nil {
		c.logger.Debug("could not tell whether a workload existed before a change made with its input's opt-in: taken as existing", zap.Stringer("workload", k), zap.String("version", version), zap.Error(err))
		return true
	}
	return existed
}

// changed reports whether a and b differ at any of keys.
func changed(a, b map[string]string, keys []string) bool {
	for _, k := range keys {
		if a[k] != b[k] {
			return true
		}
	}
	return false
}

// consumed reports whether any workload consumes the input (an object no
// workload reads never trips the circuit breaker: it rolls nothing out).
func (c *Controller) consumed(inputKey string) bool {
	for _, info := range c.kindList() {
		if objs, err := informers.Consumers(info.indexer, inputKey); err == nil && len(objs) > 0 {
			return true
		}
	}
	return false
}

// templateAt is a workload's pod template when one of its inputs changed.
type templateAt struct {
	sum uint64
	// input: the resourceVersion of that input change (0: not a number).
	input uint64
	// burst: when the first change of those seen within one
	// --reload-debounce of each other was seen (see debouncing).
	burst time.Time
}

// rememberTemplate records the pod template of workload obj, one of whose
// inputs changed just now, in the write of resourceVersion version (the
// last change wins: a template changed between two input changes is not
// after the last).
func (c *Controller) rememberTemplate(obj any, version string) {
	o, ok := obj.(*workload.Object)
	if !ok {
		return
	}
	now := c.opts.Clock.Now()
	input, _ := strconv.ParseUint(version, 10, 64)
	c.templates.Set(o.GetUID(), func(old templateAt, ok bool) templateAt {
		burst := now
		if ok && now.Sub(old.burst) < c.opts.Debounce {
			burst = old.burst
		}
		return templateAt{sum: o.TemplateSum, input: input, burst: burst}
	})
}

// templateChangedFirst corrects the record of a workload whose pod template
// change (oldObj to newObj) courier sees after an input change it recorded,
// but which was written before it: each informer delivers its own kind in
// order, not the kinds in the order of their writes. A resourceVersion is
// the API server's storage revision, one order across kinds (the writes
// of one etcd). The template written first is the one the input change
// met, so the pods it started may hold the old content and courier rolls
// the workload out. It only ever takes a change for one to roll out:
// versions that are not numbers, or not ordered, correct nothing.
func (c *Controller) templateChangedFirst(oldObj, newObj any) {
	o, ok1 := oldObj.(*workload.Object)
	n, ok2 := newObj.(*workload.Object)
	if !ok1 || !ok2 || o.TemplateSum == n.TemplateSum {
		return
	}
	written, err := strconv.ParseUint(n.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	c.templates.Update(n.GetUID(), func(t templateAt) templateAt {
		if written < t.input {
			t.sum = n.TemplateSum
		}
		return t
	})
}

// debouncing is how long a change of workload uid's inputs still waits for
// --reload-debounce: the changes seen within it of the first give one
// rollout, whatever syncs the workload sooner (a term's resync, a retry, an
// edit of the workload). Recorded by the informers' handlers, leading or
// not, it holds a change seen just before this term began too.
func (c *Controller) debouncing(uid types.UID) (time.Duration, time.Time) {
	t, _, ok := c.templates.Get(uid)
	if !ok {
		return 0, time.Time{}
	}
	return c.opts.Debounce - c.opts.Clock.Since(t.burst), t.burst
}

// templateBefore is the pod template workload uid had when the last of its
// inputs' changes was seen (false if none is recorded, or it is stale).
func (c *Controller) templateBefore(uid types.UID) (uint64, bool) {
	t, _, ok := c.templates.Get(uid)
	return t.sum, ok
}

// forgetTemplate: the changes to workload uid's inputs since its last sync
// are taken in. A rollout of them whose answer was lost is not: it is
// resolved when the cache shows whether it was made (madeAfterAll).
func (c *Controller) forgetTemplate(uid types.UID) { c.templates.Delete(uid) }

// forgetLost: workload uid is gone, or a rollout of it was made against
// the version every failed one was made against (so none of them was).
func (c *Controller) forgetLost(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.lost, uid)
}
