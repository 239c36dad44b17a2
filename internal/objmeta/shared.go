package objmeta

import (
	"hash/maphash"
	"runtime"
	"slices"
	"sync"
	"weak"

	"github.com/courier-k8s/courier/internal/wellknown"
)

// The objects courier writes (its managed-by label) share equal labels and
// annotations: the replicas of one source carry the same ones (its name,
// its content's hash, the installation), so the 10,000 replicas of a source
// in 10,000 namespaces hold them once, not 10,000 times at about 200 bytes
// each. Other objects' sets are mostly their own (a workload's baseline, a
// namespace's name), and an entry here would cost more than it shared.
//
// An entry is the set's hash and a weak pointer to the set: it never keeps a
// set alive, and goes with the last object holding it.
var shared sync.Map // uint64 → weak.Pointer[maps]

var sharedSeed = maphash.MakeSeed()

// share is mp, or an equal set an object courier manages already holds.
func share(mp *maps) *maps {
	if v, _ := mp.labels.Get(wellknown.ManagedBy); v != wellknown.ManagedByValue {
		return mp
	}
	h := mp.hash()
	if v, ok := shared.Load(h); ok {
		if held := v.(weak.Pointer[maps]).Value(); held != nil && held.equal(mp) {
			return held
		}
	}
	w := weak.Make(mp)
	shared.Store(h, w) // in place of a set gone, or of another with its hash
	runtime.AddCleanup(mp, func(h uint64) { shared.CompareAndDelete(h, w) }, h)
	return mp
}

func (mp *maps) hash() uint64 {
	var h maphash.Hash
	h.SetSeed(sharedSeed)
	for _, p := range [2]Pairs{mp.labels, mp.annotations} {
		for _, s := range p {
			maphash.WriteComparable(&h, len(s))
			h.WriteString(s)
		}
		h.WriteByte(0) // labels end here
	}
	return h.Sum64()
}

func (mp *maps) equal(o *maps) bool {
	return slices.Equal(mp.labels, o.labels) && slices.Equal(mp.annotations, o.annotations)
}
