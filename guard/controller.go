package guard

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/globs"
	"github.com/courier-k8s/courier/internal/metrics"
	"github.com/courier-k8s/courier/internal/namespaces"
	"github.com/courier-k8s/courier/internal/objmeta"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/source"
	visible "github.com/courier-k8s/courier/internal/view"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workers"
	"github.com/courier-k8s/courier/internal/writer"
)

// Options configures the guard.
type Options struct {
	SourceNamespaces globs.List
	// Compat and Installation, with SourceNamespaces, say what each object
	// is to courier (package role).
	Compat       source.Compat
	Installation string
	QueueMetrics workqueue.MetricsProvider
	// Clock is the guard's time, the revert budget's included (nil: the real clock).
	Clock clock.WithTicker
	// ScopeLabels are the label keys of --resource-label-selector: a backup
	// carries its source's values of them, so it is cached when its source
	// is.
	ScopeLabels []string
	// View is what courier sees (zero: everything): a protected source the
	// cache lacks is restored only when the view says it is gone.
	View visible.View
	// Finder reads by name what the view cannot judge from the cache.
	Finder visible.Finder
	// Contents reads the values of a protected source the cache holds the
	// metadata of only; nil: the cache holds every source's values.
	Contents *informers.Contents
}

type key struct {
	Kind, Namespace, Name string
}

func (k key) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// Controller keeps a backup of every protected source beside it and
// restores a protected source that was deleted from that backup.
type Controller struct {
	opts       Options
	roles      role.Config
	writer     *writer.Writer
	logger     *zap.Logger
	recorder   record.EventRecorder
	indexers   map[string]cache.Indexer
	namespaces cache.Store // namespaces.Namespace
	synced     []cache.InformerSynced
	queue      *workers.Queue[key]
	restored   *prometheus.CounterVec
	budget     *Budget

	mu sync.Mutex
	// retiring: protected sources whose last state before deletion was
	// unprotected (the label was removed, then the object deleted, before
	// the guard dropped the backup). Every process records them, so whoever
	// leads drops the backup rather than restore.
	retiring map[key]bool
}

// New builds the guard and registers its handlers on the Secret and
// ConfigMap informers (not yet started); it reads namespaces too.
func New(client kubernetes.Interface, secrets, configMaps, namespaces cache.SharedIndexInformer, recorder record.EventRecorder, reg prometheus.Registerer, logger *zap.Logger, o Options) (*Controller, error) {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	c := &Controller{
		opts:     o,
		roles:    role.Config{Compat: o.Compat, Allowed: o.SourceNamespaces.Match, Namespace: o.Installation},
		writer:   writer.New(client, o.ScopeLabels),
		logger:   logger.Named("guard"),
		recorder: recorder,
		indexers: map[string]cache.Indexer{
			wellknown.KindSecret:    secrets.GetIndexer(),
			wellknown.KindConfigMap: configMaps.GetIndexer(),
		},
		namespaces: namespaces.GetStore(),
		synced:     []cache.InformerSynced{secrets.HasSynced, configMaps.HasSynced, namespaces.HasSynced},
		// Backoff per source: 100 ms doubling to 5 s; a backup or restore
		// that keeps failing (quota, policy, an API server down) keeps being
		// retried, never dropped, and a deleted source is back within 5 s
		// of the failure's end however long it lasted (at a minute's cap it
		// waited up to a minute more). A few protected sources retried
		// every 5 s cost the API server nothing.
		queue: workers.NewQueue("guard", workqueue.NewTypedItemExponentialFailureRateLimiter[key](100*time.Millisecond, 5*time.Second), o.QueueMetrics, o.Clock),
		restored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: "guard", Name: "sources_restored_total",
			Help: "Protected sources that were deleted and recreated from their backup, by kind.",
		}, []string{"kind"}),
		retiring: map[key]bool{},
		budget:   NewBudget(reg, o.Clock),
	}
	reg.MustRegister(c.restored)
	metrics.Zero(c.restored, []string{wellknown.KindSecret, wellknown.KindConfigMap})
	for kind, inf := range map[string]cache.SharedIndexInformer{wellknown.KindSecret: secrets, wellknown.KindConfigMap: configMaps} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onChange(kind, nil, obj) },
			UpdateFunc: func(oldObj, newObj any) { c.onChange(kind, oldObj, newObj) },
			DeleteFunc: func(obj any) { c.onDelete(kind, obj) },
		}); err != nil {
			return nil, fmt.Errorf("guard: %s handler: %w", kind, err)
		}
	}
	return c, nil
}

// Protected reports whether m is a source the guard protects: labelled
// courier.dev/protect=true in an allowed source namespace, and owned by
// nothing: a source with owner references lives and dies with its owner
// (the garbage collector's deletion stands). Whether the cache holds its
// values or its metadata only (they are read then: withValues) does not
// change it.
func (c *Controller) Protected(m metav1.Object) bool {
	_, typ, _, _ := content.Fields(m)
	return role.Of(m, typ, c.roles).Protected
}

// withValues is the protected source (or backup) src with its values: as
// cached, or read (Options.Contents) when the cache holds its metadata
// only. A read that fails, or finds it gone or replaced, is an error: the
// source is synced again, never restored on that account.
func (c *Controller) withValues(ctx context.Context, kind string, src *view) (*view, error) {
	if c.opts.Contents == nil || content.Read(src.obj) {
		return src, nil
	}
	obj, err := c.opts.Contents.Of(ctx, kind, src.meta)
	if err != nil {
		return nil, err
	}
	return viewOf(obj), nil
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

// Restoring reports whether the source kind namespace/name is gone or being
// deleted while its backup says to restore it: the replicator keeps its
// replicas meanwhile, through any deletion, until it is back.
func (c *Controller) Restoring(kind, namespace, name string) bool {
	if !c.opts.SourceNamespaces.Match(namespace) {
		return false
	}
	k := key{kind, namespace, name}
	c.mu.Lock()
	retiring := c.retiring[k]
	c.mu.Unlock()
	if retiring {
		return false
	}
	src, backup := c.get(kind, namespace, name), c.get(kind, namespace, backupName(name))
	if src != nil && src.meta.GetDeletionTimestamp() != nil && c.Protected(src.meta) {
		return true // its backup is written from it before it goes (see sync)
	}
	if backup == nil || !isBackup(backup.meta) {
		return false
	}
	return src == nil || src.meta.GetDeletionTimestamp() != nil
}

func (c *Controller) get(kind, namespace, name string) *view {
	obj, ok, err := c.indexers[kind].GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	return viewOf(obj)
}

// sourceKey is the key of the protected source obj is, or is the backup of.
func sourceKey(kind string, m metav1.Object) key {
	if isBackup(m) {
		return key{kind, m.GetNamespace(), m.GetAnnotations()[wellknown.BackupOf]}
	}
	return key{kind, m.GetNamespace(), m.GetName()}
}

// watched reports whether m is labelled protected, or is a backup, in an
// allowed source namespace: what the guard queues.
func (c *Controller) watched(m metav1.Object) bool {
	protect, _ := objmeta.Label(m, wellknown.Protect)
	return c.opts.SourceNamespaces.Match(m.GetNamespace()) && (protect == "true" || isBackup(m))
}

// BackupOf returns the name of the source m is the backup of, if it is one.
func (c *Controller) BackupOf(m metav1.Object) (string, bool) {
	if !isBackup(m) {
		return "", false
	}
	return m.GetAnnotations()[wellknown.BackupOf], true
}

// onChange queues the source behind a protected object, one that was
// protected, or a backup.
func (c *Controller) onChange(kind string, oldObj, newObj any) {
	m, ok := newObj.(metav1.Object)
	if !ok {
		return
	}
	o, _ := oldObj.(metav1.Object)
	if c.watched(m) || (o != nil && c.watched(o)) {
		k := sourceKey(kind, m)
		if !isBackup(m) {
			c.mu.Lock()
			delete(c.retiring, k) // there again
			c.mu.Unlock()
		}
		c.queue.Add(k, time.Time{})
	}
}

func (c *Controller) onDelete(kind string, obj any) {
	obj = informers.Unwrap(obj)
	m, ok := obj.(metav1.Object)
	if !ok || !c.opts.SourceNamespaces.Match(m.GetNamespace()) {
		return
	}
	k := sourceKey(kind, m)
	switch {
	case isBackup(m):
		c.mu.Lock()
		delete(c.retiring, k) // the backup is gone: nothing left to retire
		c.mu.Unlock()
	case c.Protected(m):
	default:
		// Deleted as an unprotected object: retired, if it had a backup.
		if b := c.get(kind, m.GetNamespace(), backupName(m.GetName())); b == nil || !isBackup(b.meta) {
			return
		}
		c.mu.Lock()
		c.retiring[k] = true
		c.mu.Unlock()
	}
	c.queue.Add(k, time.Time{})
}

// Run keeps backups and restores while this process leads, until ctx ends;
// it may be called again for the next term (see package workers).
func (c *Controller) Run(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	if !cache.WaitForNamedCacheSync("guard", ctx.Done(), c.synced...) {
		return nil
	}
	c.queue.Run(ctx, 1, key{}, c.resync, c.sync, func(k key, err error) {
		c.logger.Error("backing up or restoring a protected source failed; retrying with backoff", zap.Stringer("source", k), zap.Error(err))
	})
	return nil
}

// resync starts a term: every protected source and every backup, from the
// cache (a source deleted while no one led is restored now).
func (c *Controller) resync() {
	for kind, idx := range c.indexers {
		for _, obj := range idx.List() {
			if m, ok := obj.(metav1.Object); ok && c.watched(m) {
				c.queue.Add(sourceKey(kind, m), time.Time{})
			}
		}
	}
}

// sync makes the backup of k follow its protected source, restores the
// source from its backup when it is gone, and drops the backup when the
// source is retired (unprotected, or owned by another object).
func (c *Controller) sync(ctx context.Context, k key) error {
	src, backup := c.get(k.Kind, k.Namespace, k.Name), c.get(k.Kind, k.Namespace, backupName(k.Name))
	if backup != nil && !isBackup(backup.meta) {
		if src != nil && c.Protected(src.meta) {
			c.recorder.Event(src.obj, corev1.EventTypeWarning, wellknown.ReasonBackupBlocked, fmt.Sprintf(
				"%s %s/%s exists and was not made by courier, so this protected source has no backup: if it is deleted while courier is not running, courier cannot restore it. Rename or delete that object",
				k.Kind, k.Namespace, backupName(k.Name)))
		}
		return nil
	}
	if ns, ok := namespaces.Get(c.namespaces, k.Namespace); !ok || namespaces.Terminating(ns) {
		return nil // namespace teardown deletes sources and backups alike
	}
	c.mu.Lock()
	retiring := c.retiring[k]
	c.mu.Unlock()
	switch {
	case src != nil && src.meta.GetDeletionTimestamp() != nil && !c.Protected(src.meta):
		return nil // being deleted, unprotected: nothing to keep
	case src != nil && c.Protected(src.meta):
		// Protected from its first sight, and while it is being deleted (a
		// finalizer, a foreground deletion) too: its content is still
		// there, so its backup is written, and it is restored once gone.
		src, err := c.withValues(ctx, k.Kind, src)
		if err != nil {
			return err
		}
		if !c.Protected(src.meta) {
			return nil // read newer, no longer protected: its event is on its way
		}
		if backup != nil && upToDate(backup, src) {
			return nil
		}
		return c.writeBackup(ctx, k, src, backup)
	case src != nil || retiring:
		// Retired: unprotected (or owned) now, or deleted after the label went.
		if backup == nil {
			return nil
		}
		err := c.delete(ctx, k.Kind, backup.meta)
		if err == nil {
			c.logger.Info("protected source retired; its backup is deleted", zap.Stringer("source", k))
		}
		return err
	case backup != nil:
		a, err := c.opts.View.Confirm(ctx, c.opts.Finder, k.Kind, k.Namespace, k.Name)
		switch {
		case err != nil:
			return err
		case a.Gone:
			// A backup whose managed-by label someone removed is held as
			// its metadata only: read it whole.
			if backup, err = c.withValues(ctx, k.Kind, backup); err != nil {
				return err
			}
			return c.restore(ctx, k, backup)
		case a.Lagging():
			return nil // there, and selected: its event is on its way
		case c.opts.View.Namespace(k.Namespace) != visible.Inside:
			return nil // courier may not write there now either
		}
		// It left courier's view (relabelled out of the selector): courier
		// can no longer protect it, so it is retired. Kept, its backup would
		// bring it back after an admin deleted it outside the view.
		c.logger.Warn("protected source left courier's view; its backup is deleted, and it is no longer protected", zap.Stringer("source", k), zap.String("hiddenBy", a.Hidden))
		c.recorder.Event(backup.obj, corev1.EventTypeWarning, wellknown.ReasonSourceOutOfView, fmt.Sprintf(
			"the protected source %s/%s left courier's view (%s): courier can no longer protect it, so this backup is deleted and the source is not restored if deleted. Bring it back into the view to protect it again",
			k.Namespace, k.Name, a.Hidden))
		return c.delete(ctx, k.Kind, backup.meta)
	}
	return nil
}

func (c *Controller) writeBackup(ctx context.Context, k key, src, backup *view) error {
	if backup != nil && (backup.typ != src.typ || backup.immutable) {
		// A Secret's type cannot be updated (nor an immutable object's
		// content): the source changed type, say a certificate rotated by
		// hand, so its backup is made again. Between the two writes the
		// source itself still stands.
		if err := c.delete(ctx, k.Kind, backup.meta); err != nil {
			return fmt.Errorf("back up %s: replace its backup of another type: %w", k, err)
		}
		backup = nil
	}
	var existing metav1.Object
	write := c.writer.Create
	if backup != nil {
		existing, write = backup.meta, c.writer.Update
	}
	if err := write(ctx, backupFor(src, existing, c.opts.ScopeLabels)); err != nil {
		return fmt.Errorf("back up %s: %w", k, err)
	}
	return nil
}

func (c *Controller) delete(ctx context.Context, kind string, m metav1.Object) error {
	if err := c.writer.Delete(ctx, kind, m); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// restore recreates a deleted protected source from its backup.
func (c *Controller) restore(ctx context.Context, k key, backup *view) error {
	obj, ok := restoredFrom(backup)
	if !ok {
		return fmt.Errorf("restore %s: its backup %s/%s cannot be read", k, k.Namespace, backup.meta.GetName())
	}
	restored, err := c.writer.CreateAndGet(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		return nil // someone recreated it: the next sync backs it up
	}
	if err != nil {
		c.recorder.Event(backup.obj, corev1.EventTypeWarning, wellknown.ReasonRestoreFailed, fmt.Sprintf(
			"protected source %s/%s is deleted and the API server refused to create it again from this backup: %v; courier retries every 5 s: lift what refuses it (a quota, an admission policy, courier's permission to create it)",
			k.Namespace, k.Name, err))
		return fmt.Errorf("restore %s: %w", k, err)
	}
	c.restored.WithLabelValues(k.Kind).Inc()
	c.logger.Warn("protected source was deleted; restored it from its backup", zap.Stringer("source", k))
	c.recorder.Event(restored, corev1.EventTypeWarning, wellknown.ReasonSourceRestored, fmt.Sprintf(
		"this protected source was deleted and has been restored from its backup %s; to retire it on purpose, remove the label %s=true first, then delete it",
		backup.meta.GetName(), wellknown.Protect))
	return nil
}
