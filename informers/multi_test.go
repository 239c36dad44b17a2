package informers

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// TestMultiReadsAndHandsOnEveryNamespace: over namespaces a and b, the
// composite lists, indexes and delivers only their objects; a key of
// another namespace is not found; its handler hears every part.
func TestMultiReadsAndHandsOnEveryNamespace(t *testing.T) {
	cm := func(ns, name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	client := fake.NewClientset(cm("a", "x"), cm("b", "y"), cm("c", "z"))
	parts := map[string]cache.SharedIndexInformer{}
	var factories []informers.SharedInformerFactory
	for _, ns := range []string{"a", "b"} {
		f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
		factories = append(factories, f)
		parts[ns] = f.Core().V1().ConfigMaps().Informer()
	}
	m := NewMulti(parts)
	if err := m.AddIndexers(cache.Indexers{"name": func(o any) ([]string, error) { return []string{o.(*corev1.ConfigMap).Name}, nil }}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var added []string
	reg, err := m.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(o any) {
		mu.Lock()
		defer mu.Unlock()
		added = append(added, o.(*corev1.ConfigMap).Namespace+"/"+o.(*corev1.ConfigMap).Name)
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	select {
	case <-m.HasSyncedChecker().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("not synced")
	}
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("handler not synced")
	}
	if keys := m.GetIndexer().ListKeys(); !slices.Equal(keys, []string{"a/x", "b/y"}) {
		t.Errorf("ListKeys = %v", keys)
	}
	if _, ok, _ := m.GetIndexer().GetByKey("b/y"); !ok {
		t.Error("b/y not found")
	}
	if _, ok, _ := m.GetIndexer().GetByKey("c/z"); ok {
		t.Error("c/z, of a namespace not watched, found")
	}
	if got, err := m.GetIndexer().ByIndex("name", "y"); err != nil || len(got) != 1 {
		t.Errorf("ByIndex(name, y) = %v, %v", got, err)
	}
	mu.Lock()
	slices.Sort(added)
	if !slices.Equal(added, []string{"a/x", "b/y"}) {
		t.Errorf("handler heard %v", added)
	}
	mu.Unlock()
	if err := m.GetStore().Add(cm("a", "w")); err == nil {
		t.Error("the composite store took a write")
	}
	cancel()
	for _, f := range factories {
		f.Shutdown()
	}
}

// TestMultiFindsANamespaceByItsName: a part watching one Namespace object
// holds it under the key of its name, which GetByKey routes to that part.
func TestMultiFindsANamespaceByItsName(t *testing.T) {
	parts := map[string]cache.SharedIndexInformer{}
	for _, name := range []string{"a", "b"} {
		inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Namespace{}, 0, cache.Indexers{})
		if err := inf.GetStore().Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
		parts[name] = inf
	}
	m := NewMulti(parts)
	for key, want := range map[string]bool{"a": true, "b": true, "c": false} {
		if _, ok, err := m.GetIndexer().GetByKey(key); ok != want || err != nil {
			t.Errorf("GetByKey(%q) found %v (%v), want %v", key, ok, err, want)
		}
	}
	if keys := m.GetIndexer().ListKeys(); !slices.Equal(keys, []string{"a", "b"}) {
		t.Errorf("ListKeys = %v", keys)
	}
}
