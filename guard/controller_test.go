package guard

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/globs"
	"github.com/courier-k8s/courier/internal/role"
	visible "github.com/courier-k8s/courier/internal/view"
	"github.com/courier-k8s/courier/internal/view/viewtest"
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

// created returns the objects the fake client was asked to create.
func (f *guardFixture) created() []*corev1.Secret {
	var out []*corev1.Secret
	for _, a := range f.client.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok {
			out = append(out, c.GetObject().(*corev1.Secret))
		}
	}
	return out
}

func TestABackupFollowsTheSourceAndRestoresIt(t *testing.T) {
	f := newGuardFixture(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform"}})
	src := protectedSecret()
	k := key{wellknown.KindSecret, "platform", "db"}
	if err := f.secrets.GetIndexer().Add(src); err != nil {
		t.Fatal(err)
	}
	if err := f.c.sync(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	created := f.created()
	if len(created) != 1 || created[0].Name != "courier-backup.db" || string(created[0].Data["password"]) != "s3cret" {
		t.Fatalf("backup written: %+v", created)
	}
	backup := created[0]
	backup.UID, backup.ResourceVersion = "b1", "1"
	if err := f.secrets.GetIndexer().Add(backup); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	if err := f.c.sync(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	if got := f.client.Actions(); len(got) != 0 {
		t.Errorf("an up-to-date backup was written again: %v", got)
	}

	// Deleted (say while courier was down): restored from the backup alone.
	if err := f.secrets.GetIndexer().Delete(src); err != nil {
		t.Fatal(err)
	}
	if !f.c.Restoring(k.Kind, k.Namespace, k.Name) {
		t.Fatal("not restoring a deleted protected source that has a backup")
	}
	if err := f.c.sync(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	want := protectedSecret()
	want.UID, want.ResourceVersion = "", ""
	if diff := cmp.Diff([]*corev1.Secret{want}, f.created()); diff != "" {
		t.Errorf("restored (-want +got):\n%s", diff)
	}
	if e := <-f.recorder.Events; !strings.Contains(e, wellknown.ReasonSourceRestored) {
		t.Errorf("event %q, want %s", e, wellknown.ReasonSourceRestored)
	}
}

func TestARetiredSourceLosesItsBackupAndIsNotRestored(t *testing.T) {
	f := newGuardFixture(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform"}})
	k := key{wellknown.KindSecret, "platform", "db"}
	backup := backupFor(viewOf(protectedSecret()), nil, nil).(*corev1.Secret)
	backup.UID, backup.ResourceVersion = "b1", "1"
	if err := f.secrets.GetIndexer().Add(backup); err != nil {
		t.Fatal(err)
	}
	retired := protectedSecret()
	retired.Labels = nil
	f.c.onDelete(wellknown.KindSecret, retired) // the label went, then the object, before the guard synced
	if f.c.Restoring(k.Kind, k.Namespace, k.Name) {
		t.Error("restoring a retired source")
	}
	if err := f.c.sync(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, a := range f.client.Actions() {
		verbs = append(verbs, a.GetVerb())
	}
	if diff := cmp.Diff([]string{"delete"}, verbs); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

func TestNoBackupOfAnOwnedSourceNorRestoreInATerminatingNamespace(t *testing.T) {
	owned := protectedSecret()
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "o1"}}
	f := newGuardFixture(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform"}})
	if err := f.secrets.GetIndexer().Add(owned); err != nil {
		t.Fatal(err)
	}
	if err := f.c.sync(t.Context(), key{wellknown.KindSecret, "platform", "db"}); err != nil {
		t.Fatal(err)
	}
	if got := f.client.Actions(); len(got) != 0 {
		t.Errorf("an owned source was backed up: %v", got)
	}

	now := metav1.Now()
	f = newGuardFixture(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform", DeletionTimestamp: &now}})
	backup := backupFor(viewOf(protectedSecret()), nil, nil).(*corev1.Secret)
	if err := f.secrets.GetIndexer().Add(backup); err != nil {
		t.Fatal(err)
	}
	if err := f.c.sync(t.Context(), key{wellknown.KindSecret, "platform", "db"}); err != nil {
		t.Fatal(err)
	}
	if got := f.client.Actions(); len(got) != 0 {
		t.Errorf("wrote %v into a terminating namespace", got)
	}
}

// A protected source missing from the cache is restored only when the view
// says it is gone; one that left the view is retired (#48).
func TestAProtectedSourceIsRestoredOnlyWhenGoneInsideTheView(t *testing.T) {
	mustView := func(namespaces []string, sel string) visible.View { return viewtest.View(t, namespaces, sel) }
	tests := []struct {
		name   string
		view   visible.View
		exists bool
		want   []string // the fake client's writes
	}{
		{"cluster-wide: gone, restored", visible.View{}, false, []string{"create"}},
		{"selector: deleted (not found by name), restored", mustView(nil, "courier-scope=yes"), false, []string{"create"}},
		{"selector: left the view (found by name), retired: backup deleted", mustView(nil, "courier-scope=yes"), true, []string{"delete"}},
		{"watch-namespaces: a namespace not watched, nothing", mustView([]string{"elsewhere"}, ""), true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newGuardFixture(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform"}})
			f.c.opts.View, f.c.opts.Finder = tt.view, &viewtest.Finder{Found: map[string]bool{"Secret platform/db": tt.exists}}
			backup := backupFor(viewOf(protectedSecret()), nil, nil).(*corev1.Secret)
			backup.UID, backup.ResourceVersion = "b1", "1"
			if err := f.secrets.GetIndexer().Add(backup); err != nil {
				t.Fatal(err)
			}
			if err := f.c.sync(t.Context(), key{wellknown.KindSecret, "platform", "db"}); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range f.client.Actions() {
				got = append(got, a.GetVerb())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}

// With the informers' split, a protected source (and, should its
// managed-by label be removed, its backup) is held as its metadata only:
// the guard reads its values to back it up, and the backup's to restore it.
func TestAProtectedSourceHeldAsMetadataOnlyIsBackedUpAndRestored(t *testing.T) {
	f := newGuardFixture(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform"}})
	server := map[string]runtime.Object{} // what the API server holds, by name
	reads := 0
	metadataOnly := func(obj metav1.Object) any {
		return content.FromMetadata(&metav1.PartialObjectMetadata{ObjectMeta: *obj.(*corev1.Secret).ObjectMeta.DeepCopy()}, true, true)
	}
	f.c.opts.Contents = informers.NewContents(func(_ context.Context, kind, namespace, name string) (any, error) {
		reads++
		if o, ok := server[name]; ok {
			return o.DeepCopyObject(), nil
		}
		return nil, nil
	}, func(kind, namespace, name string) (metav1.Object, bool) {
		o, ok, _ := f.secrets.GetIndexer().GetByKey(namespace + "/" + name)
		m, isMeta := o.(metav1.Object)
		return m, ok && isMeta
	}, role.Config{Namespace: "courier", Allowed: globs.List{"platform"}.Match})
	src := protectedSecret()
	server[src.Name] = src
	if err := f.secrets.GetIndexer().Add(metadataOnly(src)); err != nil {
		t.Fatal(err)
	}
	k := key{wellknown.KindSecret, "platform", "db"}
	if err := f.c.sync(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	created := f.created()
	if len(created) != 1 || string(created[0].Data["password"]) != "s3cret" || reads != 1 {
		t.Fatalf("backup written: %+v after %d reads; want one with the source's values, after one read", created, reads)
	}
	backup := created[0]
	backup.UID, backup.ResourceVersion = "b1", "1"
	backup.Labels = map[string]string{wellknown.Backup: "true"} // its managed-by label removed
	server[backup.Name] = backup
	if err := f.secrets.GetIndexer().Add(metadataOnly(backup)); err != nil {
		t.Fatal(err)
	}
	if err := f.secrets.GetIndexer().Delete(metadataOnly(src)); err != nil {
		t.Fatal(err)
	}
	delete(server, src.Name)
	f.client.ClearActions()
	if err := f.c.sync(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	if created := f.created(); len(created) != 1 || created[0].Name != "db" || string(created[0].Data["password"]) != "s3cret" {
		t.Fatalf("restored: %+v; want db with its values, read from the backup", created)
	}
}
