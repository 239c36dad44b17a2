package informers

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/rest"
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

// ExistedAt asks for the very version (an exact list by name, as the
// request on the wire says), and an object of that name with another UID
// (deleted and made again since) is not the one asked about.
func TestExistedAtListsByNameAtTheExactVersionAndMatchesTheUID(t *testing.T) {
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Path+"?"+r.URL.Query().Encode())
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"4"},`+
			`"items":[{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"namespace":"app","name":"web","uid":"w1"}}]}`)
	}))
	defer srv.Close()
	client, err := metadata.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	f := NewFinder(client)
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	for _, tt := range []struct {
		uid  types.UID
		want bool
	}{{"w1", true}, {"w2", false}} {
		if got, err := f.ExistedAt(t.Context(), deployments, "app", "web", tt.uid, "4"); err != nil || got != tt.want {
			t.Errorf("ExistedAt(web, %s) = %v, %v; want %v", tt.uid, got, err, tt.want)
		}
	}
	want := "/apis/apps/v1/namespaces/app/deployments?fieldSelector=metadata.name%3Dweb&resourceVersion=4&resourceVersionMatch=Exact"
	if len(asked) != 2 || asked[0] != want {
		t.Errorf("asked %q, want twice %q", asked, want)
	}
}
