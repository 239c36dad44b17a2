package guard

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/globs"
	"github.com/courier-k8s/courier/internal/metrics"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workers"
)

// ReasonSourceRestored is the Warning Event on a protected source that was
// deleted and recreated.
const ReasonSourceRestored = "SourceRestored"

// Options configures the guard.
type Options struct {
	SourceNamespaces globs.List
	QueueMetrics     workqueue.MetricsProvider
	// Clock is the guard's time, the revert budget's included (nil: the real clock).
	Clock clock.WithTicker
}

type key struct {
	Kind, Namespace, Name string
}

func (k key) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// Controller restores protected sources that were deleted.
type Controller struct {
	opts       Options
	client     kubernetes.Interface
	logger     *zap.Logger
	recorder   record.EventRecorder
	indexers   map[string]cache.Indexer
	namespaces corelisters.NamespaceLister
	synced     []cache.InformerSynced
	queue      *workers.Queue[key]
	restored   *prometheus.CounterVec
	budget     *Budget

	mu       sync.Mutex
	lastSeen map[key]metav1.Object // deleted protected sources awaiting restore
}

// New builds the guard and registers its handlers on the Secret and
// ConfigMap informers (not yet started); it reads namespaces too.
func New(client kubernetes.Interface, secrets, configMaps, namespaces cache.SharedIndexInformer, recorder record.EventRecorder, reg prometheus.Registerer, logger *zap.Logger, o Options) (*Controller, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Controller{
		opts:     o,
		client:   client,
		logger:   logger.Named("guard"),
		recorder: recorder,
		indexers: map[string]cache.Indexer{
			wellknown.KindSecret:    secrets.GetIndexer(),
			wellknown.KindConfigMap: configMaps.GetIndexer(),
		},
		namespaces: corelisters.NewNamespaceLister(namespaces.GetIndexer()),
		synced:     []cache.InformerSynced{secrets.HasSynced, configMaps.HasSynced, namespaces.HasSynced},
		// Backoff per source: 100 ms doubling to 1 min; a restore that keeps
		// failing (quota, policy) keeps being retried, never dropped.
		queue: workers.NewQueue(workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[key](100*time.Millisecond, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[key]{Name: "guard", MetricsProvider: o.QueueMetrics, Clock: o.Clock})),
		restored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: "guard", Name: "sources_restored_total",
			Help: "Protected sources that were deleted and recreated from their last-seen state, by kind.",
		}, []string{"kind"}),
		lastSeen: map[key]metav1.Object{},
		budget:   NewBudget(reg, o.Clock),
	}
	reg.MustRegister(c.restored)
	metrics.Zero(c.restored, []string{wellknown.KindSecret, wellknown.KindConfigMap})
	for kind, inf := range map[string]cache.SharedIndexInformer{wellknown.KindSecret: secrets, wellknown.KindConfigMap: configMaps} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onAdd(kind, obj) },
			DeleteFunc: func(obj any) { c.onDelete(kind, obj) },
		}); err != nil {
			return nil, fmt.Errorf("guard: %s handler: %w", kind, err)
		}
	}
	return c, nil
}

// Protected reports whether m is a source the guard protects: labelled
// courier.dev/protect=true in an allowed source namespace, with its values
// in the cache (the informer transform keeps them exactly for these).
func (c *Controller) Protected(m metav1.Object) bool {
	return m.GetLabels()[wellknown.Protect] == "true" && c.opts.SourceNamespaces.Match(m.GetNamespace()) && !content.IsDigested(m)
}

// Allow is the revert budget (see Budget.Allow) the replicator asks before
// undoing someone else's change to a replica.
func (c *Controller) Allow(kind, replica string) (time.Duration, bool) {
	return c.budget.Allow(kind, replica)
}

// Reverted records a revert the replicator wrote.
func (c *Controller) Reverted(kind, replica string) { c.budget.Reverted(kind, replica) }

// Forget drops the revert budget of a replica that is gone or no longer wanted.
func (c *Controller) Forget(kind, replica string) { c.budget.Forget(kind, replica) }

// Restoring reports whether a deleted protected source is waiting to be
// restored, until the cache holds it again; the replicator leaves its
// replicas alone meanwhile.
func (c *Controller) Restoring(kind, namespace, name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.lastSeen[key{kind, namespace, name}]
	return ok
}

// onAdd forgets a deleted protected source once the cache holds an object of
// its name again: restored, by this process or another, or recreated by
// someone. Every process, standby included, records and forgets alike, so a
// new leader restores only what is still missing.
func (c *Controller) onAdd(kind string, obj any) {
	m, ok := obj.(metav1.Object)
	if ok {
		c.forget(key{kind, m.GetNamespace(), m.GetName()})
	}
}

func (c *Controller) onDelete(kind string, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok || !c.Protected(m) {
		return
	}
	k := key{kind, m.GetNamespace(), m.GetName()}
	c.mu.Lock()
	c.lastSeen[k] = m
	c.mu.Unlock()
	c.queue.Add(k, time.Time{})
}

// Run restores while this process leads, until ctx ends; it may be called
// again for the next term (see package workers).
func (c *Controller) Run(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	if !cache.WaitForNamedCacheSync("guard", ctx.Done(), c.synced...) {
		return nil
	}
	c.queue.Run(ctx, 1, key{}, c.resync, c.sync, func(k key, err error) {
		c.logger.Error("restoring a protected source failed; retrying with backoff", zap.Stringer("source", k), zap.Error(err))
	})
	return nil
}

// resync starts a term: every deleted protected source still missing.
func (c *Controller) resync() {
	c.mu.Lock()
	keys := make([]key, 0, len(c.lastSeen))
	for k := range c.lastSeen {
		keys = append(keys, k)
	}
	c.mu.Unlock()
	for _, k := range keys {
		c.queue.Add(k, time.Time{})
	}
}

func (c *Controller) forget(k key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.lastSeen, k)
}

// sync recreates a deleted protected source from its last-seen state.
func (c *Controller) sync(ctx context.Context, k key) error {
	c.mu.Lock()
	last := c.lastSeen[k]
	c.mu.Unlock()
	if last == nil {
		return nil
	}
	if _, exists, err := c.indexers[k.Kind].GetByKey(k.Namespace + "/" + k.Name); err != nil || exists {
		if exists {
			c.forget(k) // recreated already, by someone or by us
		}
		return err
	}
	ns, err := c.namespaces.Get(k.Namespace)
	if apierrors.IsNotFound(err) || (err == nil && (ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating)) {
		c.forget(k) // namespace teardown deletes protected sources too
		return nil
	}
	if err != nil {
		return err
	}

	// The record stays until the cache holds the restored object (onAdd),
	// so the replicator keeps the replicas until it can see their source.
	restored, err := c.create(ctx, k.Kind, last)
	if apierrors.IsAlreadyExists(err) {
		return nil // someone recreated it: onAdd forgets the record
	}
	if err != nil {
		return fmt.Errorf("restore %s: %w", k, err)
	}
	c.restored.WithLabelValues(k.Kind).Inc()
	c.logger.Warn("protected source was deleted; restored it from its last-seen state", zap.Stringer("source", k))
	c.recorder.Event(restored, corev1.EventTypeWarning, ReasonSourceRestored, fmt.Sprintf(
		"this protected source was deleted and has been restored from its last-seen state; to retire it on purpose, remove the label %s=true first, then delete it",
		wellknown.Protect))
	return nil
}

// fresh is last's identity and metadata without what the API server assigns.
func fresh(last metav1.Object) metav1.ObjectMeta {
	annotations := maps.Clone(last.GetAnnotations())
	delete(annotations, content.DigestedAnnotation)
	return metav1.ObjectMeta{
		Name:        last.GetName(),
		Namespace:   last.GetNamespace(),
		Labels:      maps.Clone(last.GetLabels()),
		Annotations: annotations,
	}
}

func (c *Controller) create(ctx context.Context, kind string, last metav1.Object) (runtime.Object, error) {
	opts := metav1.CreateOptions{FieldManager: wellknown.FieldManager}
	switch o := last.(type) {
	case *corev1.Secret:
		s := &corev1.Secret{ObjectMeta: fresh(o), Type: o.Type, Data: o.Data, Immutable: o.Immutable}
		return c.client.CoreV1().Secrets(o.Namespace).Create(ctx, s, opts)
	case *corev1.ConfigMap:
		cm := &corev1.ConfigMap{ObjectMeta: fresh(o), Data: o.Data, BinaryData: o.BinaryData, Immutable: o.Immutable}
		return c.client.CoreV1().ConfigMaps(o.Namespace).Create(ctx, cm, opts)
	}
	return nil, fmt.Errorf("unexpected %s object %T", kind, last)
}
