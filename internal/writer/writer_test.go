package writer

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/courier-k8s/courier/internal/wellknown"
)

// replica is a replica of source in prod, as courier writes it, with the
// selector's label when labelled.
func replica(source string, labelled bool) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "db",
		Labels:      map[string]string{wellknown.ManagedBy: wellknown.ManagedByValue, wellknown.Replica: "true"},
		Annotations: map[string]string{wellknown.Source: source, wellknown.Installation: "courier"}}}
	if labelled {
		s.Labels["courier-scope"] = "yes"
	}
	return s
}

// With --resource-label-selector, Create adopts what courier wrote before
// the selector (its labels added) only when it is the same source's: an
// older source's replica of the same name is never taken (#48).
func TestCreateAdoptsOnlyTheSameSourcesReplica(t *testing.T) {
	for _, tt := range []struct {
		name, existing string
		adopted        bool
	}{
		{"the same source's replica: adopted", "platform/db", true},
		{"another source's replica: left alone", "other/db", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(replica(tt.existing, false))
			w := New(client, []string{"courier-scope"})
			err := w.Create(t.Context(), replica("platform/db", true))
			if tt.adopted != (err == nil) || (!tt.adopted && !apierrors.IsAlreadyExists(err)) {
				t.Fatalf("Create = %v, want adopted %v (else AlreadyExists)", err, tt.adopted)
			}
			got, err := client.CoreV1().Secrets("prod").Get(t.Context(), "db", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if labelled := got.Labels["courier-scope"] == "yes"; labelled != tt.adopted {
				t.Errorf("labels %v: adopted %v, want %v", got.Labels, labelled, tt.adopted)
			}
			if got.Annotations[wellknown.Source] != tt.existing {
				t.Errorf("source annotation %q, want %q kept", got.Annotations[wellknown.Source], tt.existing)
			}
		})
	}
}
