package informers

import (
	"context"
	"errors"
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
	list := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return c.List(ctx, options(o))
	}
	rl := &relister{list: list, blank: obj}
	lw := &cache.ListWatch{
		ListWithContextFunc: list,
		WatchFuncWithContext: resume(func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, options(o))
		}, rl),
	}
	inf := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, clientset), obj,
		cache.SharedIndexInformerOptions{Indexers: indexers, ObjectDescription: what})
	rl.store = inf.GetStore()
	return inf
}

// resume is w, resuming a watch that ends without being told to — the
// connection cut, the API server restarted or ending the watch — from the
// last resourceVersion it delivered (bookmarks included), after a pause of
// resumeEvery, so the reflector sees one watch go on. Left to itself, the
// reflector lists and watches again after a backoff that every ended watch
// doubles (0.8 s to 30 s, with up to as much again of jitter; reset only
// every two minutes): a few API server restarts or cut connections within
// two minutes left courier's caches stale for up to a minute.
//
// Only an end that says the API server is unavailable (the stream cut; a
// 500, 502, 503 or 504) is resumed. While resuming, the answers of an API
// server that is back but not ready are waited out too: too many requests (its watch cache still being built), and forbidden for
// up to forbiddenGrace (a restarted kube-apiserver refuses everyone its
// RBAC authorizer does not know yet). When the version to resume from is
// gone (410: a restarted kube-apiserver's new watch cache starts after it),
// rl lists again at once and tells the reflector the difference (see
// relister). Any other end — courier no longer allowed, the kind gone, a
// too large version — reaches the reflector as before, which lists again
// and calls courier's watch error handlers; so does a 410 without rl, or
// within relistEvery of rl's last list. A list streamed as a watch
// (WatchList) is resumed only once its initial events were all sent.
func resume(w watchFunc, rl *relister) cache.WatchFuncWithContext {
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
		r := &resumed{result: make(chan watch.Event), cancel: cancel, rl: rl}
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

const (
	// resumeEvery is the pause before resuming an ended watch, and between
	// two attempts while the API server cannot serve or is not ready: a few
	// requests a second per informer while it is down, and its return seen
	// within a quarter of a second.
	resumeEvery = 250 * time.Millisecond
	// forbiddenGrace is how long a resumed watch's refusal is taken for an
	// authorizer not ready yet, before it reaches the reflector (and
	// courier's watch error handlers) as a refusal.
	forbiddenGrace = 10 * time.Second
)

// relistEvery is the least time between two of rl's lists: a 410 sooner
// reaches the reflector (no loop of lists). A variable for tests.
var relistEvery = 10 * time.Second

// resumed is a watch that, when it ends unavailable, goes on from the last
// version it delivered.
type resumed struct {
	result chan watch.Event
	cancel context.CancelFunc
	rl     *relister // nil: a 410 reaches the reflector
	// relisted is when rl last listed (see relistEvery).
	relisted time.Time
}

func (r *resumed) ResultChan() <-chan watch.Event { return r.result }
func (r *resumed) Stop()                          { r.cancel() }

func (r *resumed) pass(ctx context.Context, ev watch.Event) bool {
	select {
	case r.result <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// canRelist reports whether a 410 is answered by rl's list.
func (r *resumed) canRelist(err error) bool {
	return r.rl != nil && (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) && time.Since(r.relisted) >= relistEvery
}

// run passes cur's events on; last is the version to resume from ("" until
// a streamed list's initial events are all sent: not resumable).
func (r *resumed) run(ctx context.Context, cur watch.Interface, again func(context.Context, string) (watch.Interface, error), last string) {
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
		if ok && ev.Type != watch.Error {
			if m, err := meta.Accessor(ev.Object); err == nil {
				if last != "" || ev.Type == watch.Bookmark && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					last = m.GetResourceVersion()
				}
			}
			if !r.pass(ctx, ev) {
				return
			}
			continue
		}
		var ended error // nil: the stream cut
		if ok {
			ended = apierrors.FromObject(ev.Object)
		}
		if last == "" || ok && !unavailableStatus(ended) && !r.canRelist(ended) {
			if ok {
				r.pass(ctx, ev) // the reflector decides: relist, or courier's handlers
			}
			return
		}
		cur.Stop()
		next, rv, err := r.reconnect(ctx, again, last, ended != nil && r.canRelist(ended))
		if next == nil {
			status, isStatus := err.(apierrors.APIStatus)
			if !isStatus && ctx.Err() == nil {
				// The relist could not be made: the reflector makes its own.
				status = apierrors.NewResourceExpired(err.Error())
			}
			if status != nil {
				s := status.Status()
				r.pass(ctx, watch.Event{Type: watch.Error, Object: &s})
			}
			return
		}
		cur, last = next, rv
	}
}

// reconnect returns a watch going on from last, after a relist first if
// gone (last is no longer served), and the version it goes on from. It
// returns no watch when ctx ends, or with the error that reaches the
// reflector.
func (r *resumed) reconnect(ctx context.Context, again func(context.Context, string) (watch.Interface, error), last string, gone bool) (watch.Interface, string, error) {
	var forbiddenSince time.Time
	for attempt := 0; ; attempt++ {
		if !gone || attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, "", ctx.Err()
			case <-time.After(resumeEvery):
			}
		}
		var next watch.Interface
		var err error
		if gone {
			r.relisted = time.Now()
			var rv string
			if rv, err = r.rl.relist(ctx, last, func(ev watch.Event) bool { return r.pass(ctx, ev) }); err == nil {
				last, gone = rv, false
				next, err = again(ctx, last) // at once: the list is fresh
			}
		} else {
			next, err = again(ctx, last)
		}
		switch {
		case err == nil:
			return next, last, nil
		case ctx.Err() != nil:
			return nil, "", ctx.Err()
		case errors.Is(err, errNotCaughtUp):
			return nil, "", err // the reflector lists
		case r.canRelist(err):
			gone = true
		case unavailableStatus(err) || unavailableConn(err) || apierrors.IsTooManyRequests(err):
		case apierrors.IsForbidden(err) && (forbiddenSince.IsZero() || time.Since(forbiddenSince) < forbiddenGrace):
			if forbiddenSince.IsZero() {
				forbiddenSince = time.Now()
			}
		default:
			return nil, "", err
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
