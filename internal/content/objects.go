package content

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// MaxKeyDigests is how many keys of an object the cache keeps one digest
// each for. An object with more keys is held as one digest of its whole
// content and, per key, 12 bytes (KeyIDs, KeyValues: no key name, no full
// digest), so what courier holds per key stays small whatever an object's
// number of keys (the API server's size limit counts values, not keys),
// and a workload consuming some of its keys still reloads for those only.
const MaxKeyDigests = 64

// KeyID is 8 bytes of key's sha256: how an object held as a whole knows its
// keys.
func KeyID(key string) uint64 {
	sum := sha256.Sum256([]byte(key))
	return binary.BigEndian.Uint64(sum[:8])
}

// binaryBit marks a KeyValues entry whose value is binary; the other 31
// bits are the first of its value's digest.
const binaryBit = 1 << 31

func keyValueOf(e Entry) uint32 {
	b, _ := hex.DecodeString(e.Digest[:8])
	v := binary.BigEndian.Uint32(b) &^ binaryBit
	if e.Binary {
		v |= binaryBit
	}
	return v
}

// Digested is a Secret or ConfigMap as courier's cache holds it when courier
// never copies its values (most objects): its metadata, a Secret's type,
// its immutability, and a digest per key (or one of its whole content). A
// slice of entries instead of the object's maps: a map costs some 400 bytes
// even with one key, and the cache holds one such object per Secret and
// ConfigMap in the cluster. Only this process makes one (DigestObject), so no
// object from the API server can pass for one.
type Digested struct {
	metav1.TypeMeta // Kind Secret or ConfigMap, so Events can name it
	metav1.ObjectMeta
	Type      corev1.SecretType // a Secret's; "" for a ConfigMap
	Immutable *bool
	// Entries are the per-key digests in key order, or one Whole entry.
	Entries []Entry
	// KeyIDs, with a Whole entry, are its keys' KeyIDs in order, and
	// KeyValues what each holds (see binaryBit); two slices, 12 bytes a key.
	KeyIDs    []uint64
	KeyValues []uint32
}

// DeepCopyObject copies d.
func (d *Digested) DeepCopyObject() runtime.Object {
	c := *d
	d.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	if d.Immutable != nil {
		v := *d.Immutable
		c.Immutable = &v
	}
	c.Entries = slices.Clone(d.Entries)
	c.KeyIDs, c.KeyValues = slices.Clone(d.KeyIDs), slices.Clone(d.KeyValues)
	return &c
}

// IsDigested reports whether obj is a cached object whose values courier
// does not hold.
func IsDigested(obj any) bool {
	_, ok := obj.(*Digested)
	return ok
}

// DigestObject is the cached form of a Secret or ConfigMap whose values courier
// never copies: a Digested. Anything else, a Digested included, is returned
// as it is. obj must be courier's own copy: its metadata is taken, not
// copied.
func DigestObject(obj any) any {
	var d *Digested
	switch o := obj.(type) {
	case *corev1.Secret:
		d = &Digested{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: o.ObjectMeta, Type: o.Type, Immutable: o.Immutable}
	case *corev1.ConfigMap:
		d = &Digested{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: o.ObjectMeta, Immutable: o.Immutable}
	default:
		return obj
	}
	entries := Entries(obj)
	if len(entries) > MaxKeyDigests {
		d.KeyIDs, d.KeyValues = make([]uint64, len(entries)), make([]uint32, len(entries))
		slices.SortFunc(entries, func(a, b Entry) int { return cmp.Compare(KeyID(a.Key), KeyID(b.Key)) })
		for i, e := range entries {
			d.KeyIDs[i], d.KeyValues[i] = KeyID(e.Key), keyValueOf(e)
		}
		entries = []Entry{{Whole: true, Digest: Hash(entries)}}
	}
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	d.Entries = slices.Clip(entries)
	return d
}

// DigestedCopy is the Digested form of obj, a cached Secret or ConfigMap,
// without changing obj (a Digested is returned as it is).
func DigestedCopy(obj any) any {
	switch o := obj.(type) {
	case *corev1.Secret:
		c := *o
		return DigestObject(&c)
	case *corev1.ConfigMap:
		c := *o
		return DigestObject(&c)
	}
	return obj
}

// Fields are what a Secret or ConfigMap, full or Digested, holds besides its
// content: its metadata (the cache's own: never modify it), a Secret's type
// and its immutable field; ok is false for any other object.
func Fields(obj any) (m *metav1.ObjectMeta, typ corev1.SecretType, immutable *bool, ok bool) {
	switch o := obj.(type) {
	case *Digested:
		return &o.ObjectMeta, o.Type, o.Immutable, true
	case *corev1.Secret:
		return &o.ObjectMeta, o.Type, o.Immutable, true
	case *corev1.ConfigMap:
		return &o.ObjectMeta, "", o.Immutable, true
	}
	return nil, "", nil, false
}

// Entries returns the per-key digests of a Secret or ConfigMap, full or
// Digested; for one digested as a whole, its one whole-content entry. The
// result may be the cache's own: never modify it.
func Entries(obj any) []Entry {
	switch o := obj.(type) {
	case *Digested:
		return o.Entries
	case *corev1.Secret:
		out := make([]Entry, 0, len(o.Data))
		for k, v := range o.Data {
			out = append(out, Entry{Binary: true, Key: k, Digest: Digest(v)})
		}
		return out
	case *corev1.ConfigMap:
		out := make([]Entry, 0, len(o.Data)+len(o.BinaryData))
		for k, v := range o.Data {
			out = append(out, Entry{Key: k, Digest: Digest([]byte(v))})
		}
		for k, v := range o.BinaryData {
			out = append(out, Entry{Binary: true, Key: k, Digest: Digest(v)})
		}
		return out
	}
	return nil
}

// KeyEntries returns the entries of keys that a Secret or ConfigMap, full or
// Digested, holds, in key order: for one held as a whole, what its KeyValues
// say of them (8-digit digests). Consumers of some keys compare these over
// time, whatever the object's number of keys.
func KeyEntries(obj any, keys []string) []Entry {
	sorted := slices.Compact(slices.Sorted(slices.Values(keys)))
	out := make([]Entry, 0, len(sorted))
	if d, ok := obj.(*Digested); ok && len(d.KeyIDs) > 0 {
		for _, k := range sorted {
			if i, ok := d.keyIndex(k); ok {
				v := d.KeyValues[i]
				out = append(out, Entry{Key: k, Binary: v&binaryBit != 0, Digest: fmt.Sprintf("%08x", v&^binaryBit)})
			}
		}
		return out
	}
	all := Entries(obj)
	for _, e := range all {
		if _, ok := slices.BinarySearch(sorted, e.Key); ok {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	return out
}

func (d *Digested) keyIndex(key string) (int, bool) { return slices.BinarySearch(d.KeyIDs, KeyID(key)) }

// Has reports whether a Secret or ConfigMap, full or Digested, holds key.
func Has(obj any, key string) bool {
	switch o := obj.(type) {
	case *Digested:
		if len(o.KeyIDs) > 0 {
			_, ok := o.keyIndex(key)
			return ok
		}
		_, ok := slices.BinarySearchFunc(o.Entries, key, func(e Entry, k string) int { return strings.Compare(e.Key, k) })
		return ok && !o.Entries[0].Whole
	case *corev1.Secret:
		_, ok := o.Data[key]
		return ok
	case *corev1.ConfigMap:
		_, ok := o.Data[key]
		_, bin := o.BinaryData[key]
		return ok || bin
	}
	return false
}
