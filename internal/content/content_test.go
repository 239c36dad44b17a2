package content

import (
	"testing"

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
		Data:       map[string]string{"a": "alpha"},
		BinaryData: map[string][]byte{"b": {0, 1, 2}},
	}
	digested := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{DigestedAnnotation: DigestedValue}},
		Data:       map[string]string{"a": Digest([]byte("alpha"))},
		BinaryData: map[string][]byte{"b": []byte(Digest([]byte{0, 1, 2}))},
	}
	if got, want := Hash(ConfigMapEntries(digested)), Hash(ConfigMapEntries(full)); got != want {
		t.Errorf("digested ConfigMap hash %s, full %s", got, want)
	}

	fullSecret := &corev1.Secret{Data: map[string][]byte{"k": []byte("v")}}
	digestedSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{DigestedAnnotation: DigestedValue}},
		Data:       map[string][]byte{"k": []byte(Digest([]byte("v")))},
	}
	if got, want := Hash(SecretEntries(digestedSecret)), Hash(SecretEntries(fullSecret)); got != want {
		t.Errorf("digested Secret hash %s, full %s", got, want)
	}
}
