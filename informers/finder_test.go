package informers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/courier-k8s/courier/internal/wellknown"
)

// Find reads by name with a list (the Role grants no get) and keeps no
// annotation (they may hold values).
func TestFinderReadsByNameAndKeepsNoAnnotation(t *testing.T) {
	db := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "db", Labels: map[string]string{"team": "a"},
			Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: `{"data":{"password":"c2VjcmV0"}}`}},
	}
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	client := metadatafake.NewSimpleMetadataClient(scheme, db)
	f := NewFinder(client)
	got, err := f.Find(t.Context(), wellknown.KindSecret, "platform", "db")
	if err != nil || got == nil || got.Labels["team"] != "a" {
		t.Fatalf("Find = %v, %v; want platform/db with its labels", got, err)
	}
	if len(got.Annotations) > 0 {
		t.Errorf("Find kept annotations %v", got.Annotations)
	}
	if got, err := f.Find(t.Context(), wellknown.KindSecret, "platform", "gone"); err != nil || got != nil {
		t.Errorf("Find of a name that does not exist = %v, %v; want nil", got, err)
	}
	if _, ok := client.Actions()[0].(k8stesting.ListAction); !ok {
		t.Errorf("the read is a %T, want a list (the Role grants no get)", client.Actions()[0])
	}
}
