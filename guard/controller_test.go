package guard

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/courier-k8s/courier/internal/globs"
	"github.com/courier-k8s/courier/internal/wellknown"
)

func protectedSecret() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "db", UID: "u1", ResourceVersion: "9",
			Labels:      map[string]string{wellknown.Protect: "true"},
			Annotations: map[string]string{wellknown.ReplicateTo: "*"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte("s3cret")},
	}
}

type guardFixture struct {
	client                         *fake.Clientset
	secrets, configMaps, namespace cache.SharedIndexInformer
	c                              *Controller
	recorder                       *record.FakeRecorder
}

func newGuardFixture(t *testing.T, namespace *corev1.Namespace) *guardFixture {
	t.Helper()
	client := fake.NewClientset()
	f := &guardFixture{
		client:     client,
		secrets:    cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Secret{}, 0, cache.Indexers{}),
		configMaps: cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.ConfigMap{}, 0, cache.Indexers{}),
		namespace:  cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Namespace{}, 0, cache.Indexers{}),
		recorder:   record.NewFakeRecorder(10),
	}
	if err := f.namespace.GetIndexer().Add(namespace); err != nil {
		t.Fatal(err)
	}
	c, err := New(client, f.secrets, f.configMaps, f.namespace, f.recorder, prometheus.NewRegistry(), zap.NewNop(), Options{
		SourceNamespaces: globs.List{"platform"}, Clock: testingclock.NewFakeClock(time.Unix(0, 0)),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	return f
}

func TestRestoreRecreatesADeletedProtectedSource(t *testing.T) {
	f := newGuardFixture(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform"}})
	last := protectedSecret()
	f.c.onDelete(wellknown.KindSecret, cache.DeletedFinalStateUnknown{Key: "platform/db", Obj: last})
	k := key{wellknown.KindSecret, "platform", "db"}
	if !f.c.Restoring(k.Kind, k.Namespace, k.Name) {
		t.Fatal("not restoring after the delete")
	}
	if err := f.c.sync(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Secret
	for _, a := range f.client.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok {
			got = c.GetObject().(*corev1.Secret)
		}
	}
	want := protectedSecret()
	want.UID, want.ResourceVersion = "", ""
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("restored (-want +got):\n%s", diff)
	}
	if !f.c.Restoring(k.Kind, k.Namespace, k.Name) {
		t.Error("not restoring any more before the cache holds the restored source: its replicas could be deleted")
	}
	f.c.onAdd(k.Kind, got)
	if f.c.Restoring(k.Kind, k.Namespace, k.Name) {
		t.Error("still restoring once the cache holds the restored source")
	}
	if e := <-f.recorder.Events; !strings.Contains(e, ReasonSourceRestored) {
		t.Errorf("event %q, want %s", e, ReasonSourceRestored)
	}
}

func TestNoRestoreInATerminatingNamespaceOrOfAnUnprotectedObject(t *testing.T) {
	now := metav1.Now()
	f := newGuardFixture(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform", DeletionTimestamp: &now}})
	f.c.onDelete(wellknown.KindSecret, protectedSecret())
	unprotected := protectedSecret()
	unprotected.Name, unprotected.Labels = "plain", nil
	f.c.onDelete(wellknown.KindSecret, unprotected)
	for _, name := range []string{"db", "plain"} {
		if err := f.c.sync(t.Context(), key{wellknown.KindSecret, "platform", name}); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.client.Actions(); len(got) != 0 {
		t.Errorf("wrote %v, want nothing", got)
	}
}
