package content

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
		Data:       map[string]string{"a": "alpha"},
		BinaryData: map[string][]byte{"b": {0, 1, 2}},
	}
	digested := full.DeepCopy()
	DigestConfigMap(digested)
	if got, want := Hash(ConfigMapEntries(digested)), Hash(ConfigMapEntries(full)); got != want {
		t.Errorf("digested ConfigMap hash %s, full %s", got, want)
	}

	fullSecret := &corev1.Secret{Data: map[string][]byte{"k": []byte("v")}}
	digestedSecret := fullSecret.DeepCopy()
	DigestSecret(digestedSecret)
	if got, want := Hash(SecretEntries(digestedSecret)), Hash(SecretEntries(fullSecret)); got != want {
		t.Errorf("digested Secret hash %s, full %s", got, want)
	}
}

func TestAForgedMarkerMarksNothing(t *testing.T) {
	forged := &corev1.ConfigMap{Data: map[string]string{"k": "raw value"}}
	forged.Annotations = map[string]string{DigestedAnnotation: "sha256"}
	if IsDigested(forged) {
		t.Fatal("an object from outside with the marker annotation counts as digested")
	}
	DigestConfigMap(forged)
	if !IsDigested(forged) || forged.Data["k"] != Digest([]byte("raw value")) {
		t.Errorf("a forged object was not digested: %v", forged.Data)
	}
}

func TestManyKeysAreHeldAsOneDigest(t *testing.T) {
	full := &corev1.ConfigMap{Data: map[string]string{}}
	for i := range MaxKeyDigests + 1 {
		full.Data[fmt.Sprintf("k%d", i)] = ""
	}
	digested := full.DeepCopy()
	DigestConfigMap(digested)
	if len(digested.Data) != 1 || digested.BinaryData != nil {
		t.Fatalf("held %d keys, want one digest", len(digested.Data))
	}
	if got, want := Hash(ConfigMapEntries(digested)), Hash(ConfigMapEntries(full)); got != want {
		t.Errorf("whole-digested hash %s, full %s", got, want)
	}
	s := &corev1.Secret{Data: map[string][]byte{}}
	for i := range MaxKeyDigests + 1 {
		s.Data[fmt.Sprintf("k%d", i)] = nil
	}
	want := Hash(SecretEntries(s))
	DigestSecret(s)
	if len(s.Data) != 1 || Hash(SecretEntries(s)) != want {
		t.Errorf("whole-digested Secret: %d keys, hash %s, want 1 and %s", len(s.Data), Hash(SecretEntries(s)), want)
	}
	DigestSecret(s) // digesting again changes nothing
	if Hash(SecretEntries(s)) != want {
		t.Errorf("digesting twice changed the hash")
	}
}
