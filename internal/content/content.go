// Package content defines how courier fingerprints the content of Secrets and
// ConfigMaps: a digest per key, and one hash over a whole object's content.
// The informer cache keeps only digests for objects courier never copies, so
// every comparison (replica equals source, a consumed key changed) is made on
// digests, and hashing a full object and a digested one gives the same answer.
package content

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
)

// Digest is the hex sha256 of one value.
func Digest(value []byte) string {
	sum := sha256.Sum256(value)
	return hex.EncodeToString(sum[:])
}

// Entry is one key of an object's content, or, with Whole, the hash of an
// object's whole content (the cache keeps only that for objects of more than
// MaxKeyDigests keys).
type Entry struct {
	Whole bool
	// Binary is true for Secret data and ConfigMap binaryData.
	Binary bool
	Key    string
	Digest string
}

// Hash is the hex sha256 over entries in key order (for a Whole entry, its
// digest). Keys are unique across
// data and binaryData (the API server enforces it), so the order is total.
func Hash(entries []Entry) string {
	if len(entries) == 1 && entries[0].Whole {
		return entries[0].Digest
	}
	sorted := append([]Entry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Key < sorted[j].Key })
	h := sha256.New()
	for _, e := range sorted {
		kind := "s"
		if e.Binary {
			kind = "b"
		}
		// Length-prefixing makes the encoding unambiguous.
		writeField(h, kind)
		writeField(h, e.Key)
		writeField(h, e.Digest)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func writeField(h interface{ Write([]byte) (int, error) }, s string) {
	var n [8]byte
	l := uint64(len(s))
	for i := range n {
		n[i] = byte(l >> (8 * (7 - i)))
	}
	h.Write(n[:])
	h.Write([]byte(s))
}
