package informers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
)

// relister lists an informer's objects again, when the version its watch
// would resume from is gone, and tells the reflector the difference as watch
// events: what the reflector would do itself, without its backoff.
//
// The reflector's own relist replaces its store from the list. Through a
// watch the same is said object by object: each listed object the store
// does not hold at that version as added or modified, each object the store
// holds and the list does not as deleted (an object of the informer's type
// with the stored object's metadata: the watch takes no other type), then a
// bookmark at the list's version, from which the watch goes on.
type relister struct {
	list  func(context.Context, metav1.ListOptions) (runtime.Object, error)
	blank runtime.Object // an empty object of the informer's type
	// store is the informer's, synced its HasSynced (set once it is made).
	store  cache.Store
	synced func() bool
}

// caughtUpWithin is how long a relist waits for the informer's store to
// hold the events passed before it (a variable for tests).
var caughtUpWithin = 10 * time.Second

var errNotCaughtUp = errors.New("the informer's store did not take in the watch's last event")

// relist lists every object, passing the events that bring the store to
// the list, and returns the list's version. last is the last event the
// watch passed on (other than a bookmark; zero if none): the store must
// hold it first, so that nothing the reflector still queues is missed. pass
// returns false when the watch is stopped.
func (rl *relister) relist(ctx context.Context, last watch.Event, pass func(watch.Event) bool) (string, error) {
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, caughtUpWithin, true, func(context.Context) (bool, error) {
		return rl.holds(last), nil
	}); err != nil {
		return "", fmt.Errorf("%w: %w", errNotCaughtUp, err)
	}
	var version string
	p := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		l, err := rl.list(ctx, o)
		if err == nil && version == "" {
			if m, merr := meta.ListAccessor(l); merr == nil {
				version = m.GetResourceVersion()
			}
		}
		return l, err
	})
	p.PageSize = 500
	p.FullListIfExpired = false // one list, one version
	listed := map[string]bool{}
	stopped := errors.New("stopped")
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		key, err := cache.MetaNamespaceKeyFunc(obj)
		if err != nil {
			return err
		}
		listed[key] = true
		m, _ := meta.Accessor(obj)
		ev := watch.Event{Type: watch.Added, Object: obj}
		if held, ok, _ := rl.store.GetByKey(key); ok {
			if h, err := meta.Accessor(held); err == nil && h.GetResourceVersion() == m.GetResourceVersion() {
				return nil // unchanged
			}
			ev.Type = watch.Modified
		}
		if !pass(ev) {
			return stopped
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if version == "" {
		return "", errors.New("the list has no resourceVersion")
	}
	for _, key := range rl.store.ListKeys() {
		held, ok, _ := rl.store.GetByKey(key)
		if listed[key] || !ok {
			continue
		}
		gone, err := rl.like(held)
		if err != nil {
			return "", err
		}
		if !pass(watch.Event{Type: watch.Deleted, Object: gone}) {
			return "", stopped
		}
	}
	mark := rl.blank.DeepCopyObject()
	if m, err := meta.Accessor(mark); err == nil {
		m.SetResourceVersion(version)
	}
	if !pass(watch.Event{Type: watch.Bookmark, Object: mark}) {
		return "", stopped
	}
	return version, nil
}

// holds reports whether the store holds ev (zero: the informer synced).
func (rl *relister) holds(ev watch.Event) bool {
	if ev.Object == nil {
		return rl.synced()
	}
	key, err := cache.MetaNamespaceKeyFunc(ev.Object)
	if err != nil {
		return true
	}
	held, ok, _ := rl.store.GetByKey(key)
	if ev.Type == watch.Deleted || !ok {
		return ev.Type == watch.Deleted && !ok
	}
	h, herr := meta.Accessor(held)
	m, merr := meta.Accessor(ev.Object)
	return herr == nil && merr == nil && h.GetResourceVersion() == m.GetResourceVersion()
}

// like is an object of the informer's type with held's metadata (the
// store holds transformed objects: a watch event must carry the type).
func (rl *relister) like(held any) (runtime.Object, error) {
	from, err := meta.Accessor(held)
	if err != nil {
		return nil, err
	}
	obj := rl.blank.DeepCopyObject()
	to, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	to.SetNamespace(from.GetNamespace())
	to.SetName(from.GetName())
	to.SetUID(from.GetUID())
	to.SetResourceVersion(from.GetResourceVersion())
	to.SetGeneration(from.GetGeneration())
	to.SetLabels(from.GetLabels())
	to.SetAnnotations(from.GetAnnotations())
	to.SetOwnerReferences(from.GetOwnerReferences())
	to.SetFinalizers(from.GetFinalizers())
	to.SetDeletionTimestamp(from.GetDeletionTimestamp())
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if ro, ok := held.(runtime.Object); ok {
			u.SetGroupVersionKind(ro.GetObjectKind().GroupVersionKind())
		}
	}
	return obj, nil
}
