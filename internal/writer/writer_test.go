package writer

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

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

// Create and Update speak to a real API server's HTTP interface as the
// typed clients do — the path with the namespace (and the name, for an
// update), courier's field manager, the object in protobuf even on a
// client that sets no content type — and tell its refusals apart as they
// do, without decoding what it answers.
func TestCreateAndUpdateSendTheObjectAndReadRefusals(t *testing.T) {
	type request struct{ method, path, fieldManager, contentType string }
	var got []request
	answer := http.StatusCreated
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, request{r.Method, r.URL.Path, r.URL.Query().Get("fieldManager"), r.Header.Get("Content-Type")})
		if _, err := io.ReadAll(r.Body); err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(answer)
		if answer == http.StatusCreated {
			_, _ = w.Write([]byte(`{"kind":"Secret","apiVersion":"v1","metadata":{"name":"db","namespace":"prod"},"data":{"k":"dg=="}}`))
			return
		}
		reason := metav1.StatusReasonAlreadyExists
		if r.Method == http.MethodPut {
			reason = metav1.StatusReasonConflict
		}
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Reason: reason, Code: int32(answer), Message: "refused"})
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL}) // no content type, as another cluster's
	if err != nil {
		t.Fatal(err)
	}
	w := New(client, nil)
	s := replica("platform/db", false)
	if err := w.Create(t.Context(), s); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := w.Update(t.Context(), s); err != nil {
		t.Fatalf("Update: %v", err)
	}
	answer = http.StatusConflict
	if err := w.Create(t.Context(), s); !apierrors.IsAlreadyExists(err) {
		t.Errorf("Create answered AlreadyExists: %v", err)
	}
	if err := w.Update(t.Context(), s); !apierrors.IsConflict(err) {
		t.Errorf("Update answered Conflict: %v", err)
	}
	want := request{http.MethodPost, "/api/v1/namespaces/prod/secrets", wellknown.FieldManager, "application/vnd.kubernetes.protobuf"}
	put := request{http.MethodPut, "/api/v1/namespaces/prod/secrets/db", wellknown.FieldManager, "application/vnd.kubernetes.protobuf"}
	if diff := cmp.Diff([]request{want, put, want, put}, got, cmp.AllowUnexported(request{})); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
