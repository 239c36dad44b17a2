package informers

import (
	"context"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// resourceClient is what a typed client of one resource offers an informer.
type resourceClient[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// informerOf is an informer of obj, listed and watched through c (tweak, if
// set, changes every request's options), whose watches resume (resume).
// clientset is c's clientset: a fake one cannot stream a list. what names
// the objects in client-go's logs ("": obj's type).
func informerOf[L runtime.Object](c resourceClient[L], clientset any, obj runtime.Object, what string, tweak func(*metav1.ListOptions), indexers cache.Indexers) cache.SharedIndexInformer {
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
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, clientset), obj,
		cache.SharedIndexInformerOptions{Indexers: indexers, ObjectDescription: what})
}

// resume is w, resuming a watch that ends without being told to — the
// connection cut, the API server restarted or ending the watch — from the
// last resourceVersion it delivered (bookmarks included), after a pause of
// resumeEvery, so the reflector sees one watch go on. Left to itself, the
// reflector lists and watches again after a backoff that every ended watch
// doubles (0.8 s to 30 s, with up to as much again of jitter; reset only
// every two minutes): a few API server restarts or cut connections within
// two minutes left courier's caches stale for up to a minute. Only an end
// that says the API server is unavailable (the stream cut, a 500, 502, 503
// or 504) is resumed; any other — its version compacted away (410), courier
// no longer allowed, the kind gone — reaches the reflector as before, which
// lists again and calls courier's watch error handlers. A list streamed as
// a watch (WatchList) is resumed only once its initial events were all sent.
func resume(w watchFunc) cache.WatchFuncWithContext {
	return func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		streamed := o.SendInitialEvents != nil && *o.SendInitialEvents
		if !streamed && (o.ResourceVersion == "" || o.ResourceVersion == "0") {
			return w(ctx, o) // from no known version: nothing to resume from
		}
		first, err := w(ctx, o)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(ctx)
		r := &resumed{result: make(chan watch.Event), cancel: cancel}
		last := o.ResourceVersion
		if streamed {
			last = "" // known once the initial events are all sent
		}
		// Resumed: the same request from the last version, as a plain watch.
		again := o
		again.SendInitialEvents, again.ResourceVersionMatch, again.AllowWatchBookmarks = nil, "", true
		go r.run(ctx, first, func(ctx context.Context, rv string) (watch.Interface, error) {
			again.ResourceVersion = rv
			return w(ctx, again)
		}, last)
		return r, nil
	}
}

// resumeEvery is the pause before resuming an ended watch, and between two
// attempts while the API server cannot serve.
const resumeEvery = time.Second

// resumed is a watch that, when it ends unavailable, goes on from the last
// version it delivered.
type resumed struct {
	result chan watch.Event
	cancel context.CancelFunc
}

func (r *resumed) ResultChan() <-chan watch.Event { return r.result }
func (r *resumed) Stop()                          { r.cancel() }

// run passes cur's events on; last is the version to resume from ("" until
// a streamed list's initial events are all sent: not resumable).
func (r *resumed) run(ctx context.Context, cur watch.Interface, again func(context.Context, string) (watch.Interface, error), last string) {
	defer close(r.result)
	defer func() { cur.Stop() }()
	pass := func(ev watch.Event) bool {
		select {
		case r.result <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return
		case ev, ok = <-cur.ResultChan():
		}
		if ok && ev.Type != watch.Error {
			if m, err := meta.Accessor(ev.Object); err == nil {
				if last != "" || ev.Type == watch.Bookmark && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					last = m.GetResourceVersion()
				}
			}
			if !pass(ev) {
				return
			}
			continue
		}
		if ok && !unavailableStatus(apierrors.FromObject(ev.Object)) || last == "" {
			if ok {
				pass(ev) // the reflector decides: relist, or courier's handlers
			}
			return
		}
		// Ended while the API server could not serve: resume.
		cur.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(resumeEvery):
			}
			next, err := again(ctx, last)
			if err == nil {
				cur = next
				break
			}
			if !unavailableStatus(err) && !unavailableConn(err) {
				if status, isStatus := err.(apierrors.APIStatus); isStatus {
					s := status.Status()
					pass(watch.Event{Type: watch.Error, Object: &s})
				}
				return
			}
		}
	}
}

// unavailableStatus reports whether err is an API server's answer that it
// cannot serve now (500, 502, 503, 504 but a too large resourceVersion).
func unavailableStatus(err error) bool {
	status, ok := err.(apierrors.APIStatus)
	if !ok || apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
		return false
	}
	switch status.Status().Code {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// watchFunc starts a watch.
type watchFunc func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error)
