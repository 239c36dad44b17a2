package informers

import (
	"context"
	"errors"
	"fmt"
	"reflect"
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
	store cache.Store    // the informer's (set once it is made)
}

// caughtUpWithin is how long a relist waits for the informer's store to
// take in the events passed before it (a variable for tests).
var caughtUpWithin = 10 * time.Second

// errNotCaughtUp: the relist is left to the reflector.
var errNotCaughtUp = errors.New("the informer's store did not take in the watch's last event")

// relist lists every object, passing the events that bring the store to
// the list, and returns the list's version. last is the version of the last
// event the watch passed on (bookmarks included): the store must have taken
// it in first — it records the version of the last object or bookmark it
// took in — so that nothing still queued in the reflector is missed. pass
// returns false when the watch is stopped.
func (rl *relister) relist(ctx context.Context, last string, pass func(watch.Event) bool) (string, error) {
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, caughtUpWithin, true, func(context.Context) (bool, error) {
		return rl.store.LastStoreSyncResourceVersion() == last, nil
	}); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("%w: it holds version %q, the watch passed on %q", errNotCaughtUp, rl.store.LastStoreSyncResourceVersion(), last)
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
	// WithAlloc: an item kept by the store does not hold its whole page.
	err := p.EachListItemWithAlloc(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
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

// like is held as an object of the informer's type: a copy of it, or,
// where the store holds a transformed form of another type (a watch event
// must carry the informer's), one with held's metadata.
func (rl *relister) like(held any) (runtime.Object, error) {
	if o, ok := held.(runtime.Object); ok && reflect.TypeOf(o) == reflect.TypeOf(rl.blank) {
		return o.DeepCopyObject(), nil
	}
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
