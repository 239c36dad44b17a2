package objmeta

import (
	"runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-k8s/courier/internal/wellknown"
)

// TestReplicasShareTheirLabelsAndAnnotations: objects courier manages with
// equal labels and annotations hold them once, other objects each their
// own; a change gives an object a set of its own; and the shared table
// forgets a set once no object holds it.
func TestReplicasShareTheirLabelsAndAnnotations(t *testing.T) {
	replica := func(ns, hash string) *Meta {
		m := From(&metav1.ObjectMeta{Name: "shared", Namespace: ns,
			Labels:      map[string]string{wellknown.ManagedBy: wellknown.ManagedByValue, wellknown.Replica: "true"},
			Annotations: map[string]string{wellknown.Source: "platform/shared", wellknown.ContentHash: hash}}, true)
		return &m
	}
	tenant := func(ns string) *Meta {
		m := From(&metav1.ObjectMeta{Name: "app", Namespace: ns, Labels: map[string]string{"team": "a"}}, true)
		return &m
	}
	a, b, c := replica("team-a", "h1"), replica("team-b", "h1"), replica("team-c", "h2")
	if a.maps != b.maps {
		t.Error("two replicas of one source hold their equal labels and annotations twice")
	}
	if a.maps == c.maps {
		t.Error("replicas of other content share one set")
	}
	if x, y := tenant("team-a"), tenant("team-b"); x.maps == y.maps {
		t.Error("objects courier does not manage share their sets (each would pay an entry it rarely shares)")
	}
	b.SetAnnotations(map[string]string{wellknown.Source: "platform/shared", wellknown.ContentHash: "h3"})
	if a.GetAnnotations()[wellknown.ContentHash] != "h1" || b.GetAnnotations()[wellknown.ContentHash] != "h3" {
		t.Error("a change to one replica's annotations changed another's")
	}

	h := a.maps.hash()
	a, b, c = nil, nil, nil
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		if _, ok := shared.Load(h); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the shared table still holds a set no object holds, 10s after")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
