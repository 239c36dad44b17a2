package informers

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// watches hands out fake watches and records the options of each.
type watches struct {
	mu   sync.Mutex
	opts []metav1.ListOptions
	made chan *watch.FakeWatcher
	fail error // the next watch's answer, once
}

func (ws *watches) watch(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	ws.mu.Lock()
	ws.opts = append(ws.opts, o)
	fail := ws.fail
	ws.fail = nil
	ws.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	w := watch.NewFakeWithChanSize(10, false)
	ws.made <- w
	return w, nil
}

func secretAt(rv string, initialEventsEnd bool) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "n", ResourceVersion: rv}}
	if initialEventsEnd {
		s.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	return s
}

func next(t *testing.T, w watch.Interface) (watch.Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		return ev, ok
	case <-time.After(10 * time.Second):
		t.Fatal("no event, and the watch did not end")
		return watch.Event{}, false
	}
}

// TestResumeGoesOnWhereAWatchEnded: a watch that ends (cut) goes on from
// the last version it delivered, the reflector seeing one watch; a list
// streamed as a watch does so only after its initial events; a version
// compacted away (410) ends it.
func TestResumeGoesOnWhereAWatchEnded(t *testing.T) {
	ctx := t.Context()
	ws := &watches{made: make(chan *watch.FakeWatcher, 10)}
	w, err := resume(ws.watch, nil)(ctx, metav1.ListOptions{ResourceVersion: "5", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	first := <-ws.made
	first.Modify(secretAt("7", false))
	if ev, _ := next(t, w); ev.Type != watch.Modified {
		t.Fatalf("first event: %v", ev)
	}
	first.Error(&apierrors.NewInternalError(context.Canceled).ErrStatus) // "unable to decode an event from the watch stream"
	second := <-ws.made
	if got := ws.opts[1].ResourceVersion; got != "7" {
		t.Errorf("resumed from %q, want 7 (the last version delivered)", got)
	}
	second.Delete(secretAt("9", false))
	if ev, ok := next(t, w); !ok || ev.Type != watch.Deleted {
		t.Fatalf("after resuming: %v, %v", ev, ok)
	}
	second.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
	if ev, ok := next(t, w); !ok || ev.Type != watch.Error {
		t.Fatalf("410: %v, %v; want the error passed on", ev, ok)
	}
	if _, ok := next(t, w); ok {
		t.Fatal("the watch went on after a 410")
	}
	w.Stop()

	// A refusal while resuming (the kind gone, courier no longer allowed)
	// reaches the reflector, once, and ends the watch.
	w, _ = resume(ws.watch, nil)(ctx, metav1.ListOptions{ResourceVersion: "20"})
	cut := <-ws.made
	ws.mu.Lock()
	ws.fail = apierrors.NewNotFound(schema.GroupResource{Resource: "widgets"}, "")
	ws.mu.Unlock()
	cut.Stop()
	if ev, ok := next(t, w); !ok || ev.Type != watch.Error {
		t.Fatalf("a refused resume: %v, %v; want the refusal passed on", ev, ok)
	}
	if _, ok := next(t, w); ok {
		t.Fatal("the watch went on after a refused resume")
	}
	// So does a refusal in the stream (RBAC revoked): not resumed.
	w, _ = resume(ws.watch, nil)(ctx, metav1.ListOptions{ResourceVersion: "21"})
	refused := <-ws.made
	ws.mu.Lock()
	calls := len(ws.opts)
	ws.mu.Unlock()
	refused.Error(&apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", nil).ErrStatus)
	if ev, ok := next(t, w); !ok || ev.Type != watch.Error {
		t.Fatalf("forbidden: %v, %v", ev, ok)
	}
	_, ok := next(t, w)
	ws.mu.Lock()
	again := len(ws.opts) - calls
	ws.mu.Unlock()
	if ok || again != 0 {
		t.Fatalf("a forbidden watch went on (%d more watches)", again)
	}

	// A list streamed as a watch, cut before its initial events end: over.
	streamed := metav1.ListOptions{SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true}
	w, _ = resume(ws.watch, nil)(ctx, streamed)
	list := <-ws.made
	list.Add(secretAt("10", false))
	next(t, w)
	list.Stop()
	if _, ok := next(t, w); ok {
		t.Fatal("a list cut before its initial events went on")
	}
	// ... and cut after them: resumed.
	w, _ = resume(ws.watch, nil)(ctx, streamed)
	list = <-ws.made
	list.Add(secretAt("11", false))
	list.Action(watch.Bookmark, secretAt("12", true))
	next(t, w)
	next(t, w)
	list.Stop()
	resumed := <-ws.made
	if o := ws.opts[len(ws.opts)-1]; o.ResourceVersion != "12" || o.SendInitialEvents != nil {
		t.Errorf("resumed with %+v, want a plain watch from 12", o)
	}
	resumed.Modify(secretAt("13", false))
	if ev, ok := next(t, w); !ok || ev.Type != watch.Modified {
		t.Fatalf("after resuming the list: %v, %v", ev, ok)
	}
	w.Stop()
}
