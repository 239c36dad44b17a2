package informers

import (
	"context"
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// resourceClient is what a typed client of one resource offers an informer.
type resourceClient[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// informerOf is an informer of obj, listed and watched through c (tweak, if
// set, changes every request's options), whose watches resume (resume).
// clientset is c's clientset: a fake one cannot stream a list.
func informerOf[L runtime.Object](c resourceClient[L], clientset any, obj runtime.Object, tweak func(*metav1.ListOptions), indexers cache.Indexers) cache.SharedIndexInformer {
	options := func(o metav1.ListOptions) metav1.ListOptions {
		if tweak != nil {
			tweak(&o)
		}
		return o
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.List(ctx, options(o))
		},
		WatchFuncWithContext: resume(func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, options(o))
		}),
	}
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, clientset), obj, 0, indexers)
}

// resume is w, resuming a watch that ends without being told to — the
// connection cut, the API server restarted or ending the watch — from the
// last resourceVersion it delivered, with client-go's RetryWatcher (which
// waits a second between two attempts), so the reflector sees one watch go
// on. Left to itself, the reflector lists and watches again after a
// backoff that every ended watch doubles (0.8 s to 30 s, with up to as much
// again of jitter; reset only every two minutes): a few API server
// restarts or cut connections within two minutes left courier's caches
// stale for up to a minute. A watch that cannot resume — its version
// compacted away (410 Gone), or courier no longer allowed — ends as before,
// and the reflector lists again; so does a list streamed as a watch
// (WatchList) cut before its initial events were all sent.
func resume(w watchFunc) cache.WatchFuncWithContext {
	return func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		streamed := o.SendInitialEvents != nil && *o.SendInitialEvents
		if !streamed && (o.ResourceVersion == "" || o.ResourceVersion == "0") {
			return w(ctx, o) // from no known version: nothing to resume from
		}
		// The first attempt's refusal (forbidden, gone) reaches the
		// reflector as it is, and with it courier's watch error handlers.
		first, err := w(ctx, o)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(ctx)
		r := &resumed{result: make(chan watch.Event), cancel: cancel}
		if streamed {
			go r.run(ctx, first, w, "", false)
		} else {
			go r.run(ctx, first, w, o.ResourceVersion, true)
		}
		return r, nil
	}
}

// resumed is a watch that, when it ends, goes on as a RetryWatcher from the
// last version it delivered; a list streamed as a watch, only once its
// initial events are all sent (listed).
type resumed struct {
	result chan watch.Event
	cancel context.CancelFunc
}

func (r *resumed) ResultChan() <-chan watch.Event { return r.result }
func (r *resumed) Stop()                          { r.cancel() }

func (r *resumed) run(ctx context.Context, cur watch.Interface, w watchFunc, last string, listed bool) {
	defer close(r.result)
	defer func() { cur.Stop() }()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return
		case ev, ok = <-cur.ResultChan():
		}
		ended := !ok || ev.Type == watch.Error && !gone(ev)
		if ended && listed && last != "" {
			cur.Stop()
			next, err := watchtools.NewRetryWatcherWithContext(ctx, last, w)
			if err != nil {
				return
			}
			cur = next
			continue
		}
		if !ok {
			return
		}
		if ev.Type != watch.Error {
			if m, err := meta.Accessor(ev.Object); err == nil {
				last = m.GetResourceVersion()
				listed = listed || ev.Type == watch.Bookmark && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
			}
		}
		select {
		case r.result <- ev:
		case <-ctx.Done():
			return
		}
		if ev.Type == watch.Error {
			return
		}
	}
}

// gone reports whether ev says the watch's version was compacted away.
func gone(ev watch.Event) bool {
	status, ok := ev.Object.(*metav1.Status)
	return ok && (status.Code == http.StatusGone || status.Reason == metav1.StatusReasonExpired || status.Reason == metav1.StatusReasonGone)
}

// watchFunc is a cache.WatcherWithContext.
type watchFunc func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error)

func (f watchFunc) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return f(ctx, o)
}
