package content

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/courier-k8s/courier/internal/objmeta"
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
// never copies its values (most objects): compact metadata (objmeta.Meta:
// its labels and annotations only if it bears a mark courier reads, see
// role.Marked), a Secret's type, its immutability, and a sha256 per key (or
// one of its whole content), as bytes. A slice of entries instead of the
// object's maps: a map costs some 400 bytes even with one key, and the cache
// holds one such object per Secret and ConfigMap in the cluster. Only this
// process makes one (DigestObject), so no object from the API server can
// pass for one. Read it through Fields, Entries, KeyEntries and Has.
//
// 96 bytes: what only objects with digests need is behind a pointer, so
// one held as its metadata only (MetadataOnly, most tenants' objects) pays
// 8 bytes for it.
type Digested struct {
	objmeta.Meta
	secret    bool
	immutable int8                  // 0: unset, 1: true, -1: false
	typ       unique.Handle[string] // a Secret's type (a ConfigMap: none)
	// content is its content's digests; nil: courier holds nothing of it
	// (MetadataOnly). Read it through held.
	content *digests
}

// noDigests is what held gives for an object courier holds nothing of the
// content of: no keys.
var noDigests = &digests{}

// held is d's digests; none (no keys) when courier holds nothing of its
// content (Read tells).
func (d *Digested) held() *digests {
	if d.content == nil {
		return noDigests
	}
	return d.content
}

// digests are an object's per-key digests in key order, or, for one of more
// than MaxKeyDigests keys, its whole content's (keys nil).
type digests struct {
	keys  []keyDigest
	whole *wholeContent
}

// keyDigest is one key's digest: 48 bytes (the key's name interned, behind
// a handle of 8 bytes, not a string of 16).
type keyDigest struct {
	key    unique.Handle[string]
	sum    [sha256.Size]byte
	binary bool
}

// wholeContent is an object of more than MaxKeyDigests keys: the hash of
// its whole content, and per key (in KeyID order) its KeyID and what it
// holds (see binaryBit): 12 bytes a key.
type wholeContent struct {
	sum    [sha256.Size]byte
	ids    []uint64
	values []uint32
}

// GetObjectKind names the kind (Secret or ConfigMap), so Events can name
// the object.
func (d *Digested) GetObjectKind() schema.ObjectKind {
	if d.secret {
		return secretKind
	}
	return configMapKind
}

// fixedKind is an ObjectKind that cannot be changed (it is shared).
type fixedKind struct{ gvk schema.GroupVersionKind }

func (k *fixedKind) SetGroupVersionKind(schema.GroupVersionKind) {}
func (k *fixedKind) GroupVersionKind() schema.GroupVersionKind   { return k.gvk }

var (
	secretKind    = &fixedKind{corev1.SchemeGroupVersion.WithKind("Secret")}
	configMapKind = &fixedKind{corev1.SchemeGroupVersion.WithKind("ConfigMap")}
)

// DeepCopyObject copies d.
func (d *Digested) DeepCopyObject() runtime.Object {
	c := *d
	c.Meta = d.Meta.DeepCopy()
	if d.content != nil {
		ds := digests{keys: slices.Clone(d.content.keys)}
		if d.content.whole != nil {
			w := *d.content.whole
			w.ids, w.values = slices.Clone(w.ids), slices.Clone(w.values)
			ds.whole = &w
		}
		c.content = &ds
	}
	return &c
}

// SameContent reports whether d and n hold the same type, immutability and
// content.
func (d *Digested) SameContent(n *Digested) bool {
	if d.content == nil || n.content == nil {
		// What courier does not hold may have changed with any version.
		return d.content == n.content && d.secret == n.secret && d.typ == n.typ && d.immutable == n.immutable && d.GetResourceVersion() == n.GetResourceVersion()
	}
	dc, nc := d.content, n.content
	if d.secret != n.secret || d.typ != n.typ || d.immutable != n.immutable || !slices.Equal(dc.keys, nc.keys) || (dc.whole == nil) != (nc.whole == nil) {
		return false
	}
	return dc.whole == nil || dc.whole.sum == nc.whole.sum
}

// IsDigested reports whether obj is a cached object whose values courier
// does not hold.
func IsDigested(obj any) bool {
	_, ok := obj.(*Digested)
	return ok
}

// MetadataOnly is the cached form of a Secret or ConfigMap that courier
// neither copies nor sees consumed, and whose labels and annotations bear
// no mark it reads (role.Marked): a Digested of its metadata, type and
// immutability without its content, not even digests (Read is false, and
// Entries, KeyEntries and Has know nothing of it). Who needs its content
// later reads the object again (a workload that starts consuming it).
// Anything else, a Digested included, is returned as it is.
func MetadataOnly(obj any) any {
	switch o := obj.(type) {
	case *corev1.Secret:
		return &Digested{Meta: objmeta.From(&o.ObjectMeta, false), secret: true, typ: unique.Make(string(o.Type)), immutable: tri(o.Immutable)}
	case *corev1.ConfigMap:
		return &Digested{Meta: objmeta.From(&o.ObjectMeta, false), immutable: tri(o.Immutable)}
	}
	return obj
}

// FromMetadata is the cached form of a Secret (secret) or ConfigMap that the
// API server sent as its metadata only (a metadata-only list or watch):
// what MetadataOnly keeps, with its labels and annotations if withMaps, and
// neither its type nor its immutability, which are not metadata (Fields
// gives "" and nil until courier reads the object).
func FromMetadata(m *metav1.PartialObjectMetadata, secret, withMaps bool) *Digested {
	d := &Digested{Meta: objmeta.From(&m.ObjectMeta, withMaps), secret: secret}
	if secret {
		d.typ = unique.Make("")
	}
	return d
}

// Read reports whether courier holds obj's content, as values or digests:
// false only for a MetadataOnly object.
func Read(obj any) bool {
	d, ok := obj.(*Digested)
	return !ok || d.content != nil
}

// DigestObject is the cached form of a Secret or ConfigMap whose values
// courier never copies: a Digested, with its labels and annotations if
// withMaps. Anything else, a Digested included, is returned as it is.
func DigestObject(obj any, withMaps bool) any {
	var d *Digested
	switch o := obj.(type) {
	case *corev1.Secret:
		d = &Digested{Meta: objmeta.From(&o.ObjectMeta, withMaps), secret: true, typ: unique.Make(string(o.Type)), immutable: tri(o.Immutable)}
	case *corev1.ConfigMap:
		d = &Digested{Meta: objmeta.From(&o.ObjectMeta, withMaps), immutable: tri(o.Immutable)}
	default:
		return obj
	}
	d.content = &digests{}
	entries := Entries(obj)
	if len(entries) > MaxKeyDigests {
		w := &wholeContent{ids: make([]uint64, len(entries)), values: make([]uint32, len(entries))}
		slices.SortFunc(entries, func(a, b Entry) int { return cmp.Compare(KeyID(a.Key), KeyID(b.Key)) })
		for i, e := range entries {
			w.ids[i], w.values[i] = KeyID(e.Key), keyValueOf(e)
		}
		w.sum = sumOf(Hash(entries))
		d.content.whole = w
		return d
	}
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	d.content.keys = make([]keyDigest, len(entries))
	for i, e := range entries {
		d.content.keys[i] = keyDigest{key: unique.Make(e.Key), sum: sumOf(e.Digest), binary: e.Binary}
	}
	return d
}

func tri(b *bool) int8 {
	switch {
	case b == nil:
		return 0
	case *b:
		return 1
	}
	return -1
}

// sumOf is a hex sha256 (Digest, Hash) as bytes.
func sumOf(digest string) [sha256.Size]byte {
	var out [sha256.Size]byte
	_, _ = hex.Decode(out[:], []byte(digest))
	return out
}

// DigestedCopy is the Digested form of obj, a cached Secret or ConfigMap,
// with its labels and annotations, without changing obj (a Digested is
// returned as it is).
func DigestedCopy(obj any) any {
	switch o := obj.(type) {
	case *corev1.Secret:
		c := *o
		return DigestObject(&c, true)
	case *corev1.ConfigMap:
		c := *o
		return DigestObject(&c, true)
	}
	return obj
}

// Fields are what a Secret or ConfigMap, full or Digested, holds besides its
// content: its metadata (the cache's own: never modify it), a Secret's type
// and its immutable field; ok is false for any other object.
func Fields(obj any) (m metav1.Object, typ corev1.SecretType, immutable *bool, ok bool) {
	switch o := obj.(type) {
	case *Digested:
		if o.immutable != 0 {
			v := o.immutable > 0
			immutable = &v
		}
		var typ corev1.SecretType
		if o.secret {
			typ = corev1.SecretType(o.typ.Value())
		}
		return o, typ, immutable, true
	case *corev1.Secret:
		return o, o.Type, o.Immutable, true
	case *corev1.ConfigMap:
		return o, "", o.Immutable, true
	}
	return nil, "", nil, false
}

// Entries returns the per-key digests of a Secret or ConfigMap, full or
// Digested; for one digested as a whole, its one whole-content entry.
func Entries(obj any) []Entry {
	switch o := obj.(type) {
	case *Digested:
		h := o.held()
		if h.whole != nil {
			return []Entry{{Whole: true, Digest: hex.EncodeToString(h.whole.sum[:])}}
		}
		out := make([]Entry, len(h.keys))
		for i, k := range h.keys {
			out[i] = Entry{Binary: k.binary, Key: k.key.Value(), Digest: hex.EncodeToString(k.sum[:])}
		}
		return out
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
	if d, ok := obj.(*Digested); ok && d.held().whole != nil {
		for _, k := range sorted {
			if i, ok := d.keyIndex(k); ok {
				v := d.content.whole.values[i]
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

func (d *Digested) keyIndex(key string) (int, bool) {
	return slices.BinarySearch(d.content.whole.ids, KeyID(key))
}

// Has reports whether a Secret or ConfigMap, full or Digested, holds key.
func Has(obj any, key string) bool {
	switch o := obj.(type) {
	case *Digested:
		if o.held().whole != nil {
			_, ok := o.keyIndex(key)
			return ok
		}
		_, ok := slices.BinarySearchFunc(o.held().keys, key, func(e keyDigest, k string) int { return strings.Compare(e.key.Value(), k) })
		return ok
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
