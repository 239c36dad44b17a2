package reloader

import (
	"encoding/binary"
	"encoding/hex"
	"hash/fnv"
	"maps"
	"slices"
	"strings"

	"github.com/courier-k8s/courier/internal/inputs"
)

// versions is courier.dev/config-versions: for each input the cache holds
// the metadata of only, the version (versionOf) whose content its digest in
// the baseline was made of. A restart reads such an input only if it
// moved since: the same version of the same object has the same content,
// so its digest is the baseline's.
//
// It is an annotation apart from the baseline, not part of it: a courier
// that does not know it reads the baseline as before, and one that finds it
// stale (an input changed in ways that wrote no baseline, a labels-only
// write) reads the input once, as without it.
type versions map[string]string

// versionOf is what versions records of input ref at resourceVersion rv:
// the version and, for a reference that consumes some keys only or is
// optional, a fingerprint of how: the same version consumed another way
// has another digest. "" when rv cannot be recorded.
func versionOf(ref inputs.Ref, rv string) string {
	if rv == "" || strings.ContainsAny(rv, ",=:") {
		return ""
	}
	if ref.All() && !ref.Optional {
		return rv
	}
	h := fnv.New64a()
	keys := slices.Sorted(slices.Values(ref.Keys))
	if ref.Optional {
		h.Write([]byte{1})
	}
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
	}
	return rv + ":" + hex.EncodeToString(binary.BigEndian.AppendUint32(nil, uint32(h.Sum64())))
}

// parseVersions reads courier.dev/config-versions; entries it cannot read
// are dropped (those inputs are read, as without it).
func parseVersions(s string) versions {
	v := versions{}
	for _, part := range strings.Split(s, ",") {
		if id, ver, ok := strings.Cut(strings.TrimSpace(part), "="); ok && id != "" && ver != "" {
			v[id] = ver
		}
	}
	return v
}

// encode is v as courier.dev/config-versions, in ID order.
func (v versions) encode() string {
	parts := make([]string, 0, len(v))
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
