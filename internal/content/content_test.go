package content

import (
	"fmt"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestHashIsOrderIndependentAndUnambiguous(t *testing.T) {
	a := []Entry{{Key: "a", Digest: Digest([]byte("1"))}, {Key: "b", Digest: Digest([]byte("2"))}}
	b := []Entry{a[1], a[0]}
	if Hash(a) != Hash(b) {
		t.Fatalf("hash depends on order")
	}
	tests := []struct {
		name string
		x, y []Entry
	}{
		{"value changed", a, []Entry{a[0], {Key: "b", Digest: Digest([]byte("3"))}}},
		{"key renamed", a, []Entry{a[0], {Key: "c", Digest: a[1].Digest}}},
		{"binary vs string", a, []Entry{a[0], {Binary: true, Key: "b", Digest: a[1].Digest}}},
		{"key removed", a, a[:1]},
		{"empty vs one", nil, a[:1]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if Hash(tt.x) == Hash(tt.y) {
				t.Errorf("Hash(%v) == Hash(%v)", tt.x, tt.y)
			}
		})
	}
}

func TestDigestedAndFullObjectsHashAlike(t *testing.T) {
	full := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns", Labels: map[string]string{"a": "b"}},
		Data:       map[string]string{"a": "alpha", "c": "gamma"},
		BinaryData: map[string][]byte{"b": {0, 1, 2}},
	}
	digested := DigestObject(full.DeepCopy(), true).(*Digested)
	if got, want := Hash(Entries(digested)), Hash(Entries(full)); got != want {
		t.Errorf("digested ConfigMap hash %s, full %s", got, want)
	}
	if digested.GetObjectKind().GroupVersionKind().Kind != "ConfigMap" || digested.GetName() != "cm" || digested.GetLabels()["a"] != "b" || !IsDigested(digested) || IsDigested(full) {
		t.Errorf("digested ConfigMap %+v", digested)
	}
	for _, k := range []string{"a", "b", "c"} {
		if !Has(digested, k) || !Has(full, k) {
			t.Errorf("Has(%q) is false", k)
		}
	}
	if Has(digested, "d") || Has(digested, "") {
		t.Error("Has a key it does not hold")
	}

	immutable := true
	fullSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"l": "v"}}, Type: corev1.SecretTypeTLS, Immutable: &immutable, Data: map[string][]byte{"k": []byte("v")}}
	digestedSecret := DigestObject(fullSecret.DeepCopy(), true).(*Digested)
	if got, want := Hash(Entries(digestedSecret)), Hash(Entries(fullSecret)); got != want {
		t.Errorf("digested Secret hash %s, full %s", got, want)
	}
	if _, typ, imm, _ := Fields(digestedSecret); digestedSecret.GetObjectKind().GroupVersionKind().Kind != "Secret" || typ != corev1.SecretTypeTLS || !*imm {
		t.Errorf("digested Secret %+v", digestedSecret)
	}
	for _, obj := range []any{fullSecret, digestedSecret} {
		if m, typ, imm, ok := Fields(obj); !ok || m == nil || typ != corev1.SecretTypeTLS || imm == nil || !*imm {
			t.Errorf("Fields(%T) = %v, %q, %v, %t", obj, m, typ, imm, ok)
		}
	}
	if _, typ, _, ok := Fields(digested); !ok || typ != "" {
		t.Errorf("Fields(a digested ConfigMap) = %q, %t", typ, ok)
	}
	if _, _, _, ok := Fields(&corev1.Namespace{}); ok {
		t.Error("Fields(a Namespace) is ok")
	}
	if again := DigestObject(digestedSecret, true); again != digestedSecret {
		t.Error("digesting a Digested again made a new object")
	}
	c := digestedSecret.DeepCopyObject().(*Digested)
	c.content.keys[0].sum[0]++
	c.SetLabels(map[string]string{"x": "y"})
	if !c.SameContent(c) || c.SameContent(digestedSecret) || digestedSecret.GetLabels()["x"] != "" || c.GetLabels()["x"] != "y" {
		t.Error("DeepCopyObject shares the digests or the labels")
	}
}

func TestManyKeysAreHeldAsOneDigest(t *testing.T) {
	full := &corev1.ConfigMap{Data: map[string]string{}}
	for i := range MaxKeyDigests + 1 {
		full.Data[fmt.Sprintf("k%d", i)] = ""
	}
	digested := DigestObject(full.DeepCopy(), true).(*Digested)
	if e := Entries(digested); len(e) != 1 || !e[0].Whole || digested.content.keys != nil {
		t.Fatalf("held %d entries, want one whole digest", len(e))
	}
	if got, want := Hash(Entries(digested)), Hash(Entries(full)); got != want {
		t.Errorf("whole-digested hash %s, full %s", got, want)
	}
	if !Has(digested, "k1") || Has(digested, "nope") {
		t.Error("a whole-digested object does not know its keys")
	}
	// Its keys' entries tell a change of one key from a change of another.
	before := KeyEntries(digested, []string{"k1", "k2", "nope"})
	if len(before) != 2 || before[0].Key != "k1" || before[1].Key != "k2" {
		t.Fatalf("KeyEntries = %+v, want k1 and k2", before)
	}
	full.Data["k3"] = "changed"
	after := DigestObject(full.DeepCopy(), true).(*Digested)
	if Hash(KeyEntries(after, []string{"k1", "k2"})) != Hash(before) {
		t.Error("a change of k3 changed what k1 and k2 hold")
	}
	if Hash(KeyEntries(after, []string{"k3"})) == Hash(KeyEntries(digested, []string{"k3"})) {
		t.Error("a change of k3 is not seen in k3")
	}
	if c := after.DeepCopyObject().(*Digested); len(c.content.whole.ids) != len(after.content.whole.ids) || &c.content.whole.ids[0] == &after.content.whole.ids[0] || &c.content.whole.values[0] == &after.content.whole.values[0] {
		t.Error("DeepCopyObject shares the key digests")
	}
	s := &corev1.Secret{Data: map[string][]byte{}}
	for i := range MaxKeyDigests + 1 {
		s.Data[fmt.Sprintf("k%d", i)] = nil
	}
	want := Hash(Entries(s))
	if got := Hash(Entries(DigestObject(s, true))); got != want {
		t.Errorf("whole-digested Secret: hash %s, want %s", got, want)
	}
}

// An object held as its metadata only keeps its metadata, type and
// immutability, answers no content question, and costs 96 bytes, what only
// objects with digests need being behind a pointer (#51).
func TestMetadataOnlyHoldsNoContent(t *testing.T) {
	immutable := true
	full := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", UID: "0b7e4c1a-6f0e-4c53-9a52-3d0f7d8b9e21", ResourceVersion: "7"},
		Type: corev1.SecretTypeTLS, Immutable: &immutable, Data: map[string][]byte{"k": []byte("v")}}
	m := MetadataOnly(full.DeepCopy()).(*Digested)
	if Read(m) || !Read(DigestObject(full.DeepCopy(), false)) || !Read(full) {
		t.Error("Read tells a metadata-only object from others wrongly")
	}
	if len(Entries(m)) != 0 || Has(m, "k") || len(KeyEntries(m, []string{"k"})) != 0 {
		t.Error("a metadata-only object answers for its content")
	}
	if _, typ, imm, ok := Fields(m); !ok || typ != corev1.SecretTypeTLS || imm == nil || !*imm || m.GetName() != "s" || m.GetResourceVersion() != "7" || m.GetUID() != full.UID {
		t.Errorf("Fields = %q %v %t, metadata %s %s %s", typ, imm, ok, m.GetName(), m.GetResourceVersion(), m.GetUID())
	}
	if MetadataOnly(m) != m {
		t.Error("MetadataOnly of a Digested made a new object")
	}
	c := m.DeepCopyObject().(*Digested)
	if Read(c) || !m.SameContent(c) {
		t.Error("a copy of a metadata-only object differs from it")
	}
	c.SetResourceVersion("8")
	if m.SameContent(c) || m.SameContent(DigestObject(full.DeepCopy(), false).(*Digested)) {
		t.Error("an object courier holds nothing of the content of is the same at another version, or as one it holds")
	}
	if size := unsafe.Sizeof(Digested{}); size > 96 {
		t.Errorf("a Digested is %d bytes, want 96 at most", size)
	}
}
