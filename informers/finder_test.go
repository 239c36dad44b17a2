package informers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/courier-k8s/courier/internal/wellknown"
)

// Find reads by name, keeps no annotation (they may hold values), and asks
// the API server once per fan-out, not once per replica.
func TestFinderReadsByNameOncePerWave(t *testing.T) {
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
	clk := testingclock.NewFakeClock(time.Unix(0, 0))
	f := NewFinder(client, clk)
	lists := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "list" {
				n++
			}
		}
		return n
	}
	for range 3 {
		got, err := f.Find(t.Context(), wellknown.KindSecret, "platform", "db")
		if err != nil || got == nil || got.Labels["team"] != "a" {
			t.Fatalf("Find = %v, %v; want platform/db with its labels", got, err)
		}
		if len(got.Annotations) > 0 {
			t.Errorf("Find kept annotations %v", got.Annotations)
		}
	}
	if n := lists(); n != 1 {
		t.Errorf("%d lists for three questions within %s, want 1", n, findFresh)
	}
	clk.Step(findFresh)
	if got, err := f.Find(t.Context(), wellknown.KindSecret, "platform", "gone"); err != nil || got != nil {
		t.Errorf("Find of a name that does not exist = %v, %v; want nil", got, err)
	}
	if _, err := f.Find(t.Context(), wellknown.KindSecret, "platform", "db"); err != nil {
		t.Fatal(err)
	}
	if n := lists(); n != 3 {
		t.Errorf("%d lists after the answer aged, want 3", n)
	}
	if _, ok := client.Actions()[0].(k8stesting.ListAction); !ok {
		t.Errorf("the read is a %T, want a list (the Role grants no get)", client.Actions()[0])
	}
}
