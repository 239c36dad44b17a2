package reloader

import (
	"encoding/binary"
	"encoding/hex"
	"hash/fnv"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/courier-k8s/courier/internal/inputs"
)

// versions is courier.dev/config-versions: for each input the cache holds
// the metadata of only, the version (versionOf) whose content its digest in
// the baseline was made of. A restart reads such an input only if it
// moved since: the same resourceVersion of the same object has the same
// content, so its digest is the baseline's.
//
// It is an annotation apart from the baseline, not part of it, so a courier
// that does not know it reads the baseline as before; and it names the
// baseline it was written with (a digest of courier.dev/config-inputs), so
// a baseline written without it since (by such a courier, by hand, or a
// record written again) voids it. One found stale (an input that changed
// in a way that wrote no baseline: labels only, a key not consumed) costs
// that input a read, as without it.
type versions map[string]string

// inputsField is the entry of versions naming the baseline it goes with.
const inputsField = "inputs"

// versionOf is what versions records of input ref, the object uid at
// resourceVersion rv: the version, and a fingerprint of the object and of
// how ref consumes it (its keys, optional): another object of the name, or
// the same version consumed another way, has another digest. "" when rv
// cannot be recorded.
func versionOf(ref inputs.Ref, uid types.UID, rv string) string {
	if rv == "" || strings.ContainsAny(rv, ",=:") {
		return ""
	}
	h := fnv.New64a()
	h.Write([]byte(uid))
	h.Write([]byte{0})
	if ref.Optional {
		h.Write([]byte{1})
	}
	if !ref.All() {
		for _, k := range slices.Sorted(slices.Values(ref.Keys)) {
			h.Write([]byte{0})
			h.Write([]byte(k))
		}
	}
	return rv + ":" + short(h.Sum64())
}

// short is a 64-bit hash's first 32 bits in hex.
func short(sum uint64) string {
	return hex.EncodeToString(binary.BigEndian.AppendUint32(nil, uint32(sum>>32)))
}

// baselineID is the short digest of a courier.dev/config-inputs value that
// versions written with it carry.
func baselineID(configInputs string) string {
	h := fnv.New64a()
	h.Write([]byte(configInputs))
	return short(h.Sum64())
}

// parseVersions reads courier.dev/config-versions s, written with the
// baseline configInputs: none when it names another baseline. Entries it
// cannot read are dropped (those inputs are read, as without it).
func parseVersions(s, configInputs string) versions {
	v := versions{}
	for _, part := range strings.Split(s, ",") {
		if id, ver, ok := strings.Cut(strings.TrimSpace(part), "="); ok && id != "" && ver != "" {
			v[id] = ver
		}
	}
	if v[inputsField] != baselineID(configInputs) {
		return nil
	}
	delete(v, inputsField)
	return v
}

// encode is v as courier.dev/config-versions beside the baseline
// configInputs, in ID order.
func (v versions) encode(configInputs string) string {
	parts := []string{inputsField + "=" + baselineID(configInputs)}
	for _, id := range slices.Sorted(maps.Keys(v)) {
		parts = append(parts, id+"="+v[id])
	}
	return strings.Join(parts, ",")
}

// of is what v says of the inputs whose digest in b is the one they were
// observed with: the baseline b records them at those versions. An input
// b keeps an older digest of (a rollout held back) is left out, so it is
// read after a restart and its change is not lost.
func (v versions) of(b, observedNow baseline) versions {
	out := versions{}
	for id, ver := range v {
		if d, ok := b[id]; ok && d == observedNow[id] {
			out[id] = ver
		}
	}
	return out
}
