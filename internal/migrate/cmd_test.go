package migrate

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// An object deleted between the list and --apply is reported as gone, and
// the others are still annotated: in a live cluster objects come and go.
func TestApplySaysAnObjectDeletedSinceItWasListedIsGone(t *testing.T) {
	client := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kept"}})
	add := map[string]string{"courier.dev/replicate-to": "a"}
	r := Report{Objects: []Object{
		{Kind: "Secret", Namespace: "ns", Name: "deleted", Add: add},
		{Kind: "Secret", Namespace: "ns", Name: "kept", Add: add},
	}}
	if err := r.Apply(context.Background(), client, nil); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	got := map[string][2]bool{}
	for _, o := range r.Objects {
		got[o.Name] = [2]bool{o.Applied, o.Gone}
	}
	if diff := cmp.Diff(map[string][2]bool{"deleted": {false, true}, "kept": {true, false}}, got); diff != "" {
		t.Errorf("[applied, gone] per object (-want +got):\n%s", diff)
	}
	s, err := client.CoreV1().Secrets("ns").Get(context.Background(), "kept", metav1.GetOptions{})
	if err != nil || s.Annotations["courier.dev/replicate-to"] != "a" {
		t.Errorf("the kept Secret's annotations: %v (%v)", s.Annotations, err)
	}
}
