package informers

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// answers is a resourceClient whose next answers the test sets.
type answers struct {
	err error
	w   *watch.FakeWatcher
}

func (a *answers) List(context.Context, metav1.ListOptions) (*corev1.SecretList, error) {
	return &corev1.SecretList{}, a.err
}

func (a *answers) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	if a.err != nil {
		return nil, a.err
	}
	return a.w, nil
}

// A namespace refused is served again only once its cache holds what the
// API server sends: after the list is replaced (the watch that follows a
// plain list), or at the end of a streamed list's initial events; not when
// the request is merely accepted (#48).
func TestANamespaceIsServedAgainOnlyOnceItsCacheIsRefilled(t *testing.T) {
	r := newReach([]string{"a"}, zap.NewNop())
	var told []string
	r.served = func(ns string) { told = append(told, ns) }
	a := &answers{err: apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", nil)}
	p := reporting[*corev1.SecretList]{c: a, report: r.reportingTo("a", "secrets")}
	ctx := t.Context()

	_, _ = p.List(ctx, metav1.ListOptions{})
	if !r.Refused("a") {
		t.Fatal("a refused list did not make the namespace refused")
	}
	a.err = nil
	_, _ = p.List(ctx, metav1.ListOptions{})
	if !r.Refused("a") {
		t.Fatal("an accepted list counted before the reflector replaced its store")
	}
	_, _ = p.Watch(ctx, metav1.ListOptions{ResourceVersion: "5"})
	if r.Refused("a") || len(told) != 1 {
		t.Fatalf("the watch after the list: refused %v, told %v; want served, told once", r.Refused("a"), told)
	}

	// Refused again; then a list streamed as a watch.
	a.err = apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", nil)
	_, _ = p.Watch(ctx, metav1.ListOptions{})
	a.err, a.w = nil, watch.NewFake()
	w, err := p.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	pass := func(e watch.Event) {
		t.Helper()
		go a.w.Action(e.Type, e.Object)
		select {
		case <-w.ResultChan():
		case <-time.After(5 * time.Second):
			t.Fatal("the event never came through")
		}
	}
	pass(watch.Event{Type: watch.Added, Object: &corev1.Secret{}})
	if !r.Refused("a") {
		t.Fatal("a streamed list counted before its initial events ended")
	}
	end := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	pass(watch.Event{Type: watch.Bookmark, Object: end})
	if r.Refused("a") || len(told) != 2 {
		t.Errorf("after the initial events: refused %v, told %v; want served, told twice", r.Refused("a"), told)
	}
}
