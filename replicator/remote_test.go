package replicator

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestWhatWasToldOfAClusterSecretGoesWithIt: what was last told of a
// cluster Secret (an invalid kubeconfig, unreachable) lives as long as the
// Secret, and what was told of other objects (a refused pull) stays.
func TestWhatWasToldOfAClusterSecretGoesWithIt(t *testing.T) {
	c := &Controller{told: map[types.UID]string{}}
	c.tellOnce("kept", "unreachable")
	c.tellOnce("deleted", "unreachable")
	c.tellOnce("a-pull", "refused")
	c.ClusterSecretDeleted("deleted")
	if _, ok := c.told["deleted"]; ok {
		t.Error("what was told of a deleted cluster Secret is still held")
	}
	if c.told["kept"] != "unreachable" {
		t.Error("what was told of a cluster Secret still there was forgotten")
	}
	if c.told["a-pull"] != "refused" {
		t.Error("what was told of an object that is not a cluster Secret was forgotten")
	}
}
