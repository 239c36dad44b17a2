package replica

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-k8s/courier/internal/wellknown"
)

// A replica written into another cluster is its writer's alone: the
// cluster's own courier (same installation namespace) never takes it for
// its own, and the writer never takes that courier's replicas for its own.
func TestReplicasInAnotherClusterBelongToTheirWriterOnly(t *testing.T) {
	marked := func(annotations map[string]string) metav1.Object {
		return &metav1.ObjectMeta{Labels: map[string]string{wellknown.ManagedBy: wellknown.ManagedByValue, wellknown.Replica: "true"}, Annotations: annotations}
	}
	hub := Identity("courier", "hub", "east")
	for _, tt := range []struct {
		name         string
		obj          metav1.Object
		installation string
		managed      bool
	}{
		{"the hub's replica, to the hub", marked(map[string]string{wellknown.Source: "a/b", wellknown.Installation: "courier", wellknown.SourceCluster: "hub", wellknown.TargetCluster: "east"}), hub, true},
		{"the hub's replica, to the cluster's own courier", marked(map[string]string{wellknown.Source: "a/b", wellknown.Installation: "courier", wellknown.SourceCluster: "hub", wellknown.TargetCluster: "east"}), "courier", false},
		{"another hub's replica", marked(map[string]string{wellknown.Source: "a/b", wellknown.Installation: "courier", wellknown.SourceCluster: "other", wellknown.TargetCluster: "east"}), hub, false},
		{"the hub's replica written through another cluster Secret that reaches the same cluster", marked(map[string]string{wellknown.Source: "a/b", wellknown.Installation: "courier", wellknown.SourceCluster: "hub", wellknown.TargetCluster: "east-v2"}), hub, false},
		{"the cluster's own replica, to the hub", marked(map[string]string{wellknown.Source: "a/b", wellknown.Installation: "courier"}), hub, false},
		{"a replica naming no installation, to the hub", marked(map[string]string{wellknown.Source: "a/b"}), hub, false},
		{"a replica naming no installation, in its own cluster", marked(map[string]string{wellknown.Source: "a/b"}), "courier", true},
	} {
		if _, managed := OwnerOf(tt.obj, tt.installation); managed != tt.managed {
			t.Errorf("%s: managed = %v, want %v", tt.name, managed, tt.managed)
		}
	}
}
