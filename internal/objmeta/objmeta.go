// Package objmeta is the compact metadata courier's caches hold for the
// objects they keep in a form of courier's own (content.Digested): only the
// fields courier reads, the namespace and repeated label and annotation
// strings shared between objects (package unique: released with the last
// object that names them), the UID as 16 bytes. A typed object's
// metav1.ObjectMeta is about 250 bytes before any of its strings; a Meta is
// under half of that, and the cache holds one per Secret and ConfigMap.
package objmeta

import (
	"encoding/hex"
	"slices"
	"strconv"
	"time"
	"unique"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Meta implements metav1.Object over the fields courier reads. The setters
// exist for the interface; a cached Meta is never changed.
type Meta struct {
	name      string
	namespace unique.Handle[string]
	// uid is a canonical UUID's 16 bytes (else rare.uidText).
	uid [16]byte
	// version is the resourceVersion when it is a decimal number without
	// leading zeros, as every API server writes it (else rare.versionText;
	// 0: none).
	version uint64
	created int64 // Unix seconds (the API server's precision)
	// maps are its labels and annotations, behind a pointer: most cached
	// objects keep none (nil), and pay 8 bytes for them, not 48. Never
	// changed once made (objects share them: share).
	maps *maps
	// rare is what few objects have (nil: none of it), so the rest do not
	// pay for its fields.
	rare *rare
}

type maps struct{ labels, annotations Pairs }

func (m *Meta) labels() Pairs {
	if m.maps == nil {
		return nil
	}
	return m.maps.labels
}

func (m *Meta) annotations() Pairs {
	if m.maps == nil {
		return nil
	}
	return m.maps.annotations
}

// setMaps sets m's labels and annotations (none: nil maps).
func (m *Meta) setMaps(labels, annotations Pairs) {
	m.maps = nil
	if labels != nil || annotations != nil {
		m.maps = share(&maps{labels: labels, annotations: annotations})
	}
}

type rare struct {
	uidText string // a UID that is not a canonical UUID (only tests make them)
	// versionText is a resourceVersion that is not a number version holds.
	versionText string
	deletion    *metav1.Time
	owners      []metav1.OwnerReference
	// finalizers: a replica's writes keep what others put there.
	finalizers []string
}

// rareFields is m.rare, made if m has none.
func (m *Meta) rareFields() *rare {
	if m.rare == nil {
		m.rare = &rare{}
	}
	return m.rare
}

// From is the Meta of m, with its labels and annotations if withMaps (else
// none). It copies what it keeps; m is not changed.
func From(m *metav1.ObjectMeta, withMaps bool) Meta {
	out := Meta{name: m.Name, namespace: unique.Make(m.Namespace)}
	if m.DeletionTimestamp != nil || len(m.OwnerReferences) > 0 || len(m.Finalizers) > 0 {
		out.rare = &rare{deletion: m.DeletionTimestamp, owners: m.OwnerReferences, finalizers: m.Finalizers}
	}
	if !m.CreationTimestamp.IsZero() {
		out.created = m.CreationTimestamp.Unix()
	}
	if withMaps {
		out.setMaps(PairsOf(m.Labels), PairsOf(m.Annotations))
	}
	out.setUID(m.UID)
	out.SetResourceVersion(m.ResourceVersion)
	return out
}

// maxInterned is the longest value Intern shares: label and annotation
// values that repeat (a replica's source, courier's installation, a
// source's content hash across its replicas) are short.
const maxInterned = 128

// Intern is s, its bytes shared with every other live Intern of an equal
// string (up to maxInterned bytes; a longer s is returned as it is).
func Intern(s string) string {
	if len(s) > maxInterned {
		return s
	}
	return unique.Make(s).Value()
}

func (m *Meta) setUID(uid types.UID) {
	m.uid = [16]byte{}
	if m.rare != nil {
		m.rare.uidText = ""
	}
	if b, ok := parseUUID(string(uid)); ok && b != [16]byte{} {
		m.uid = b
		return
	}
	if uid != "" {
		m.rareFields().uidText = string(uid)
	}
}

// GetResourceVersion is the object's resourceVersion.
func (m *Meta) GetResourceVersion() string {
	if m.version == 0 {
		if m.rare == nil {
			return ""
		}
		return m.rare.versionText
	}
	return strconv.FormatUint(m.version, 10)
}

// SetResourceVersion sets it.
func (m *Meta) SetResourceVersion(version string) {
	m.version = 0
	if m.rare != nil {
		m.rare.versionText = ""
	}
	if n, err := strconv.ParseUint(version, 10, 64); err == nil && n != 0 && version[0] != '0' && version[0] != '+' {
		m.version = n
		return
	}
	if version != "" {
		m.rareFields().versionText = version
	}
}

// parseUUID reads the canonical 8-4-4-4-12 hex form.
func parseUUID(s string) ([16]byte, bool) {
	var out [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return out, false
	}
	hexDigits := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	for _, c := range []byte(hexDigits) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') { // lower case only: GetUID must give back the same string
			return out, false
		}
	}
	_, err := hex.Decode(out[:], []byte(hexDigits))
	return out, err == nil
}

func (m *Meta) SetNamespace(namespace string)       { m.namespace = unique.Make(namespace) }
func (m *Meta) GetName() string                     { return m.name }
func (m *Meta) SetName(name string)                 { m.name = name }
func (m *Meta) GetGenerateName() string             { return "" }
func (m *Meta) SetGenerateName(string)              {}
func (m *Meta) GetGeneration() int64                { return 0 }
func (m *Meta) SetGeneration(int64)                 {}
func (m *Meta) GetSelfLink() string                 { return "" }
func (m *Meta) SetSelfLink(string)                  {}
func (m *Meta) GetLabels() map[string]string        { return m.labels().Map() }
func (m *Meta) SetLabels(labels map[string]string)  { m.setMaps(PairsOf(labels), m.annotations()) }
func (m *Meta) GetAnnotations() map[string]string   { return m.annotations().Map() }
func (m *Meta) SetAnnotations(a map[string]string)  { m.setMaps(m.labels(), PairsOf(a)) }
func (m *Meta) SetFinalizers(f []string)            { m.rareFields().finalizers = f }
func (m *Meta) SetDeletionTimestamp(t *metav1.Time) { m.rareFields().deletion = t }

func (m *Meta) GetFinalizers() []string {
	if m.rare == nil {
		return nil
	}
	return m.rare.finalizers
}

func (m *Meta) GetDeletionTimestamp() *metav1.Time {
	if m.rare == nil {
		return nil
	}
	return m.rare.deletion
}
func (m *Meta) GetDeletionGracePeriodSeconds() *int64 {
	return nil
}
func (m *Meta) SetDeletionGracePeriodSeconds(*int64) {}
func (m *Meta) GetOwnerReferences() []metav1.OwnerReference {
	if m.rare == nil {
		return nil
	}
	return m.rare.owners
}
func (m *Meta) SetOwnerReferences(refs []metav1.OwnerReference) { m.rareFields().owners = refs }
func (m *Meta) GetManagedFields() []metav1.ManagedFieldsEntry   { return nil }
func (m *Meta) SetManagedFields([]metav1.ManagedFieldsEntry)    {}
func (m *Meta) SetUID(uid types.UID)                            { m.setUID(uid) }

func (m *Meta) GetUID() types.UID {
	if m.uid == [16]byte{} {
		if m.rare == nil {
			return ""
		}
		return types.UID(m.rare.uidText)
	}
	var b [36]byte
	hex.Encode(b[0:8], m.uid[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], m.uid[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], m.uid[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], m.uid[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], m.uid[10:16])
	return types.UID(b[:])
}

func (m *Meta) GetCreationTimestamp() metav1.Time {
	if m.created == 0 {
		return metav1.Time{}
	}
	return metav1.NewTime(time.Unix(m.created, 0))
}

func (m *Meta) SetCreationTimestamp(t metav1.Time) {
	m.created = 0
	if !t.IsZero() {
		m.created = t.Unix()
	}
}

// DeepCopy is a copy of m that shares nothing it could change. Its labels
// and annotations are m's: a Meta's maps and their Pairs are never changed
// once made (the setters replace them), and objects courier manages share
// theirs (share).
func (m *Meta) DeepCopy() Meta {
	c := *m
	if r := m.rare; r != nil {
		c.rare = &rare{uidText: r.uidText, versionText: r.versionText, deletion: r.deletion.DeepCopy(), finalizers: slices.Clone(r.finalizers)}
		if r.owners != nil {
			c.rare.owners = make([]metav1.OwnerReference, len(r.owners))
			for i := range r.owners {
				r.owners[i].DeepCopyInto(&c.rare.owners[i])
			}
		}
	}
	return c
}

// ObjectMeta is m as a metav1.ObjectMeta, for code that needs the type.
func (m *Meta) ObjectMeta() metav1.ObjectMeta {
	c := m.DeepCopy()
	return metav1.ObjectMeta{Name: c.name, Namespace: c.GetNamespace(), UID: c.GetUID(), ResourceVersion: c.GetResourceVersion(),
		CreationTimestamp: c.GetCreationTimestamp(), DeletionTimestamp: c.GetDeletionTimestamp(), Labels: c.labels().Map(), Annotations: c.annotations().Map(),
		OwnerReferences: c.GetOwnerReferences(), Finalizers: c.GetFinalizers()}
}

// Equal reports whether m and o hold the same metadata (go-cmp uses it).
func (m Meta) Equal(o Meta) bool {
	return equality.Semantic.DeepEqual(m.ObjectMeta(), o.ObjectMeta())
}

// GetNamespace is the namespace ("" for a zero Meta, whose handle is unset).
func (m *Meta) GetNamespace() string {
	if m.namespace == (unique.Handle[string]{}) {
		return ""
	}
	return m.namespace.Value()
}

// Annotation is m's annotation key (no map is built).
func (m *Meta) Annotation(key string) (string, bool) { return m.annotations().Get(key) }

// Label is m's label key (no map is built).
func (m *Meta) Label(key string) (string, bool) { return m.labels().Get(key) }

var _ metav1.Object = (*Meta)(nil)
