package status

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metafake "k8s.io/client-go/metadata/fake"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// A source deleted between the list and its read (a namespace being torn
// down) is no source any more, not an error that stops the report.
func TestCollectSkipsASourceDeletedMeanwhile(t *testing.T) {
	gone := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "src", Name: "popular", Annotations: map[string]string{wellknown.ReplicateTo: "*"}},
	}
	scheme := metafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	meta := metafake.NewSimpleMetadataClient(scheme, []runtime.Object{gone}...)
	c, err := Collect(context.Background(), fake.NewClientset(), meta, source.Compat{}, informers.Scope{})
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	for _, o := range c.Objects {
		if o.Meta.GetName() == "popular" {
			t.Errorf("a source deleted since the list is reported: %+v", o)
		}
	}
}
