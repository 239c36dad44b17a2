package informers

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// With a metadata client, the Secrets and ConfigMaps courier manages (its
// managed-by label) are listed whole and held as their digests, and every
// other only as its metadata, so the API server never sends their values;
// one informer answers for both.
func TestASetWithAMetadataClientListsOnlyWhatCourierManagesWhole(t *testing.T) {
	managed := map[string]string{wellknown.ManagedBy: wellknown.ManagedByValue}
	replica := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "ca", Labels: managed}, Data: map[string][]byte{"k": []byte("v")}}
	tenant := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db"}, Data: map[string][]byte{"password": []byte("hunter2")}}
	source := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "settings",
		Annotations: map[string]string{wellknown.ReplicateTo: "team-*"}}, Data: map[string]string{"k": "v"}}
	client := fake.NewClientset(replica, tenant, source)
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	partial := func(kind string, m metav1.ObjectMeta) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind}, ObjectMeta: m}
	}
	meta := metadatafake.NewSimpleMetadataClient(scheme, partial("Secret", replica.ObjectMeta), partial("Secret", tenant.ObjectMeta),
		partial("ConfigMap", source.ObjectMeta))
	s, err := New(client, meta, role.Config{Namespace: "courier"}, Scope{}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer func() { cancel(); s.Shutdown() }()
	s.Start(ctx)
	if err := s.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}

	secrets := s.Secrets.Informer().GetIndexer()
	got, ok, _ := secrets.GetByKey("app/ca")
	if !ok || !content.Read(got) || !content.Has(got, "k") {
		t.Errorf("courier's replica: held %v, digests %v; want its digests", ok, ok && content.Read(got))
	}
	got, ok, _ = secrets.GetByKey("app/db")
	if !ok || content.Read(got) {
		t.Errorf("a tenant's Secret: held %v, content %v; want its metadata only", ok, ok && content.Read(got))
	}
	got, ok, _ = s.ConfigMaps.Informer().GetIndexer().GetByKey("app/settings")
	if !ok || content.Read(got) || got.(metav1.Object).GetAnnotations()[wellknown.ReplicateTo] != "team-*" {
		t.Errorf("a source: held %v; want its metadata only, with its annotations", ok)
	}
	if n := len(secrets.List()); n != 2 {
		t.Errorf("%d Secrets listed, want 2", n)
	}
	for _, a := range client.Actions() {
		if l, ok := a.(k8stesting.ListAction); ok && (a.GetResource().Resource == "secrets" || a.GetResource().Resource == "configmaps") {
			if sel := l.GetListRestrictions().Labels.String(); !strings.Contains(sel, managedByCourier) {
				t.Errorf("%s listed whole with the label selector %q, not only courier's", a.GetResource().Resource, sel)
			}
		}
	}
}
