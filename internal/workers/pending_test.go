package workers

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/courier-k8s/courier/internal/heap"
)

func TestKeepsTheEarliestAndTakeEndsTheWait(t *testing.T) {
	p := NewPending[string]()
	t0 := time.Unix(100, 0)
	p.Remember("k", t0.Add(time.Second))
	p.Remember("k", t0)
	p.Remember("k", t0.Add(2*time.Second))
	p.Remember("k", time.Time{})
	if got, ok := p.Take("k"); !ok || !got.Equal(t0) {
		t.Fatalf("Take = %v %v, want %v true", got, ok, t0)
	}
	if _, ok := p.Take("k"); ok {
		t.Errorf("a second Take still found the key")
	}
}

// TestAnEmptiedPendingHoldsNoRoomForItsPeak: after a burst of keys, all
// taken, the heap holds no room for them (a Go map never shrinks by
// itself), and a map that stayed small is kept.
func TestAnEmptiedPendingHoldsNoRoomForItsPeak(t *testing.T) {
	p := NewPending[pair]()
	keys := pairKeys()
	before := heap.Live()
	for _, k := range keys {
		p.Remember(k, time.Unix(1, 0))
	}
	full := heap.Live()
	for _, k := range keys {
		p.Take(k)
	}
	emptied := heap.Live()
	runtime.KeepAlive(keys)
	t.Logf("heap: %d KiB, with 100,000 keys %d KiB, all taken %d KiB", before>>10, full>>10, emptied>>10)
	if grew := int64(emptied) - int64(before); grew > 64<<10 {
		t.Errorf("all keys taken, the heap still holds %d KiB more than before them", grew>>10)
	}
	small := p.m
	p.Remember(keys[0], time.Unix(1, 0))
	p.Take(keys[0])
	if len(p.m) != 0 || reflect.ValueOf(p.m).UnsafePointer() != reflect.ValueOf(small).UnsafePointer() {
		t.Error("a map that held one key was made anew")
	}
}

// pair is a replicator's key, in the shape the memory tests measure.
type pair struct{ Kind, Namespace, Name, Target, Cluster string }

// pairKeys are 100,000 pair keys: a source's replicas in 100,000 namespaces.
func pairKeys() []pair {
	keys := make([]pair, 100000)
	for i := range keys {
		keys[i] = pair{"Secret", "platform", "ca", fmt.Sprintf("tenant-%05d", i), ""}
	}
	return keys
}
