package replicator

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestWhatWasToldOfAClusterSecretGoesWithIt: what was last told of a
// cluster Secret (an invalid kubeconfig, unreachable) lives as long as the
// Secret: once it is no longer listed it is forgotten, and what was told
// of other objects (a refused pull) stays, as does what was told of a
// Secret looked at after the list was made (by another worker).
func TestWhatWasToldOfAClusterSecretGoesWithIt(t *testing.T) {
	c := &Controller{told: map[types.UID]string{}, toldOf: map[types.UID]uint64{}}
	look := func(uid types.UID) {
		c.toldOf[uid] = c.toldSeq
		c.toldSeq++
		c.tellOnce(uid, "unreachable")
	}
	look("kept")
	look("deleted")
	listed := c.toldSeq
	look("added-since")
	c.tellOnce("a-pull", "refused")
	c.forgetClusterSecretsGone(map[types.UID]bool{"kept": true}, listed)
	if _, ok := c.told["deleted"]; ok {
		t.Error("what was told of a deleted cluster Secret is still held")
	}
	if _, ok := c.toldOf["deleted"]; ok {
		t.Error("a deleted cluster Secret is still counted among them")
	}
	if c.told["kept"] != "unreachable" {
		t.Error("what was told of a cluster Secret still there was forgotten")
	}
	if c.told["added-since"] != "unreachable" {
		t.Error("what was told of a cluster Secret added after the list was forgotten")
	}
	if c.told["a-pull"] != "refused" {
		t.Error("what was told of an object that is not a cluster Secret was forgotten")
	}
}
