package content

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IsDigested reports whether obj came from courier's cache with its values
// replaced by digests.
func IsDigested(obj metav1.Object) bool {
	return obj.GetAnnotations()[DigestedAnnotation] == DigestedValue
}

// SecretEntries returns the per-key digests of a Secret, full or digested.
func SecretEntries(s *corev1.Secret) []Entry {
	digested := IsDigested(s)
	out := make([]Entry, 0, len(s.Data))
	for k, v := range s.Data {
		out = append(out, Entry{Binary: true, Key: k, Digest: digestOf(v, digested)})
	}
	return out
}

// ConfigMapEntries returns the per-key digests of a ConfigMap, full or digested.
func ConfigMapEntries(cm *corev1.ConfigMap) []Entry {
	digested := IsDigested(cm)
	out := make([]Entry, 0, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		out = append(out, Entry{Key: k, Digest: digestOf([]byte(v), digested)})
	}
	for k, v := range cm.BinaryData {
		out = append(out, Entry{Binary: true, Key: k, Digest: digestOf(v, digested)})
	}
	return out
}

func digestOf(v []byte, digested bool) string {
	if digested {
		return string(v)
	}
	return Digest(v)
}
