package informers

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

func secretNamed(name, rv string, labels map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: name, ResourceVersion: rv, Labels: labels}}
}

// relistSetup is a relister over a store holding a@1, b@2 and c@3 (c
// labelled), whose list (paged by 2) holds a@1, b@5 and d@6 at version 10.
func relistSetup(t *testing.T) (*relister, *[]metav1.ListOptions) {
	t.Helper()
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, s := range []*corev1.Secret{secretNamed("a", "1", nil), secretNamed("b", "2", nil), secretNamed("c", "3", map[string]string{"courier.dev/protect": "true"})} {
		if err := store.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	items := []corev1.Secret{*secretNamed("a", "1", nil), *secretNamed("b", "5", nil), *secretNamed("d", "6", nil)}
	var lists []metav1.ListOptions
	list := func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
		lists = append(lists, o)
		from := 0
		if o.Continue != "" {
			from = 2
		}
		l := &corev1.SecretList{ListMeta: metav1.ListMeta{ResourceVersion: "10"}}
		if o.Continue == "" {
			l.Continue = "more"
		}
		l.Items = items[from:min(from+2, len(items))]
		return l, nil
	}
	return &relister{list: list, blank: &corev1.Secret{}, store: store}, &lists
}

// describe is an event as type, name and version (and labels if any).
func describe(ev watch.Event) string {
	m, _ := meta.Accessor(ev.Object)
	s := string(ev.Type) + " " + m.GetName() + "@" + m.GetResourceVersion()
	for k, v := range m.GetLabels() {
		s += " " + k + "=" + v
	}
	return s
}

// TestARelistTellsTheStoreItsDifference: what changed as modified, what is
// new as added, what is gone as deleted with its last metadata, nothing
// for what is unchanged, then a bookmark at the list's version; the list
// asks the newest data, page by page.
func TestARelistTellsTheStoreItsDifference(t *testing.T) {
	rl, lists := relistSetup(t)
	var got []string
	rv, err := rl.relist(t.Context(), "3", func(ev watch.Event) bool {
		if _, ok := ev.Object.(*corev1.Secret); !ok {
			t.Errorf("%s carries a %T: the reflector takes only the informer's type", ev.Type, ev.Object)
		}
		got = append(got, describe(ev))
		return true
	})
	if err != nil || rv != "10" {
		t.Fatalf("relist: %q, %v; want version 10", rv, err)
	}
	want := []string{"MODIFIED b@5", "ADDED d@6", "DELETED c@3 courier.dev/protect=true", "BOOKMARK @10"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	for _, o := range *lists {
		if o.ResourceVersion != "" || o.Limit != 500 {
			t.Errorf("listed with %+v, want the newest data (no version) in pages of 500", o)
		}
	}
	if len(*lists) != 2 {
		t.Errorf("%d list requests, want 2 pages", len(*lists))
	}
}

// TestARelistWaitsForTheStoreToHoldWhatWasPassed: an event the store has
// not taken in yet (still queued in the reflector) could be of an object
// deleted since; the relist waits for the store to have taken in the
// watch's last version, and without it gives up, leaving the relist to the
// reflector.
func TestARelistWaitsForTheStoreToHoldWhatWasPassed(t *testing.T) {
	defer func(d time.Duration) { caughtUpWithin = d }(caughtUpWithin)
	caughtUpWithin = 200 * time.Millisecond
	rl, lists := relistSetup(t)
	pass := func(watch.Event) bool { return true }
	if _, err := rl.relist(t.Context(), "7", pass); !errors.Is(err, errNotCaughtUp) || len(*lists) != 0 {
		t.Fatalf("relist before the store took in version 7: %v, %d lists; want errNotCaughtUp and none", err, len(*lists))
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = rl.store.Delete(secretNamed("a", "7", nil))
	}()
	if _, err := rl.relist(t.Context(), "7", pass); err != nil {
		t.Fatalf("relist once the store took in version 7 (a deletion): %v", err)
	}
}

// TestAResumedWatchWhoseVersionIsGoneListsAgainAtOnce: a watch resumed
// after an outage, refused at first (a restarted kube-apiserver's
// authorizer not ready), then told its version is gone (its new watch
// cache starts later), goes on after a relist of its own, from the list's
// version; the reflector sees neither the refusal nor the 410.
func TestAResumedWatchWhoseVersionIsGoneListsAgainAtOnce(t *testing.T) {
	rl, _ := relistSetup(t)
	ws := &watches{made: make(chan *watch.FakeWatcher, 10)}
	w, err := resume(ws.watch, rl)(t.Context(), metav1.ListOptions{ResourceVersion: "3"})
	if err != nil {
		t.Fatal(err)
	}
	cut := <-ws.made
	ws.mu.Lock()
	ws.fail = apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", nil)
	ws.mu.Unlock()
	cut.Stop()
	expired := <-ws.made // after the refusal
	expired.Error(&apierrors.NewResourceExpired("too old resource version: 3 (9)").ErrStatus)
	var got []string
	for range 4 {
		ev, ok := next(t, w)
		if !ok {
			t.Fatalf("the watch ended after %v", got)
		}
		got = append(got, describe(ev))
	}
	if diff := cmp.Diff([]string{"MODIFIED b@5", "ADDED d@6", "DELETED c@3 courier.dev/protect=true", "BOOKMARK @10"}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	fresh := <-ws.made
	ws.mu.Lock()
	froms := []string{}
	for _, o := range ws.opts {
		froms = append(froms, o.ResourceVersion)
	}
	ws.mu.Unlock()
	if diff := cmp.Diff([]string{"3", "3", "3", "10"}, froms); diff != "" {
		t.Errorf("the watches' versions (-want +got):\n%s", diff)
	}
	fresh.Modify(secretNamed("a", "11", nil))
	if ev, ok := next(t, w); !ok || describe(ev) != "MODIFIED a@11" {
		t.Fatalf("after the relist: %v, %v", ev, ok)
	}
	// A second 410 at once is the reflector's (no loop of lists).
	fresh.Error(&apierrors.NewResourceExpired("too old").ErrStatus)
	if ev, ok := next(t, w); !ok || ev.Type != watch.Error {
		t.Fatalf("a 410 right after a relist: %v, %v; want it passed on", ev, ok)
	}
	w.Stop()
}

// secretsServer is a resourceClient of Secrets: List answers items at
// version, Watch the next watcher queued (or a 410 once gone is set).
type secretsServer struct {
	mu      sync.Mutex
	items   []corev1.Secret
	version string
	froms   []string
	watches chan *watch.FakeWatcher
}

func (s *secretsServer) List(_ context.Context, _ metav1.ListOptions) (*corev1.SecretList, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &corev1.SecretList{ListMeta: metav1.ListMeta{ResourceVersion: s.version}, Items: slices.Clone(s.items)}, nil
}

func (s *secretsServer) Watch(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	s.froms = append(s.froms, o.ResourceVersion)
	s.mu.Unlock()
	w := watch.NewFakeWithChanSize(10, false)
	s.watches <- w
	return w, nil
}

// TestAnInformerTakesARelistThroughItsWatch: a real informer, its watch
// ended and then told its version is gone, ends up holding what the list
// holds, its handlers told of the deleted object with its last labels,
// and watches on from the list's version — without the reflector's own
// relist (which would list again only after its backoff).
func TestAnInformerTakesARelistThroughItsWatch(t *testing.T) {
	srv := &secretsServer{version: "5", watches: make(chan *watch.FakeWatcher, 10),
		items: []corev1.Secret{*secretNamed("a", "1", nil), *secretNamed("b", "2", nil), *secretNamed("c", "3", map[string]string{"team": "x"})}}
	inf := informerOf[*corev1.SecretList](srv, noWatchList{}, &corev1.Secret{}, "", nil, cache.Indexers{})
	deleted := make(chan *corev1.Secret, 1)
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			t.Errorf("%s was deleted by the reflector's own relist", d.Key)
			return
		}
		deleted <- obj.(*corev1.Secret)
	}}); err != nil {
		t.Fatal(err)
	}
	go inf.RunWithContext(t.Context())
	if !cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
		t.Fatal("not synced")
	}
	first := <-srv.watches
	first.Modify(secretNamed("a", "6", nil))
	srv.mu.Lock()
	srv.items = []corev1.Secret{*secretNamed("a", "6", nil), *secretNamed("b", "7", nil), *secretNamed("d", "8", nil)}
	srv.version = "9"
	srv.mu.Unlock()
	first.Stop() // cut
	(<-srv.watches).Error(&apierrors.NewResourceExpired("too old resource version: 6 (9)").ErrStatus)
	select {
	case c := <-deleted:
		if c.Name != "c" || c.Labels["team"] != "x" {
			t.Errorf("deleted: %s with labels %v, want c with team=x", c.Name, c.Labels)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no deletion of c")
	}
	next := <-srv.watches
	next.Modify(secretNamed("d", "10", nil))
	// A second restart with nothing in between: listed again as well (the
	// store took in the first relist's bookmark).
	defer func(d time.Duration) { relistEvery = d }(relistEvery)
	relistEvery = 0
	srv.mu.Lock()
	srv.items = []corev1.Secret{*secretNamed("a", "6", nil), *secretNamed("d", "10", nil)}
	srv.version = "12"
	srv.mu.Unlock()
	next.Error(&apierrors.NewResourceExpired("too old resource version: 10 (12)").ErrStatus)
	select {
	case b := <-deleted:
		if b.Name != "b" {
			t.Errorf("deleted %s, want b", b.Name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no deletion of b after the second 410")
	}
	last := <-srv.watches
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		var got []string
		for _, o := range inf.GetStore().List() {
			got = append(got, o.(*corev1.Secret).Name+"@"+o.(*corev1.Secret).ResourceVersion)
		}
		slices.Sort(got)
		return slices.Equal(got, []string{"a@6", "d@10"}), nil
	}); err != nil {
		t.Fatalf("the store: %v", inf.GetStore().ListKeys())
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	last.Stop()
	if diff := cmp.Diff([]string{"5", "6", "9", "12"}, srv.froms); diff != "" {
		t.Errorf("watched from (-want +got):\n%s", diff)
	}
}
