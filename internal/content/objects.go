package content

import (
	"crypto/rand"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxKeyDigests is how many keys of an object the cache keeps one digest
// each for. An object with more keys is held as one digest of its whole
// content, so what courier holds per object is bounded whatever its number
// of keys (the API server's size limit counts values, not keys).
const MaxKeyDigests = 64

// The values of DigestedAnnotation: a random nonce drawn when the process
// starts, never written anywhere, so no object from the API server can carry
// it — a forged marker is just another annotation. Set once, never changed.
var (
	markKeys  = nonce()         // values replaced by per-key digests
	markWhole = markKeys + "/1" // the whole content as one digest, under key ""
)

func nonce() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic("content: no randomness for the cache marker: " + err.Error())
	}
	return hex.EncodeToString(b)
}

// The annotations of every digested object that had none: one map for all
// of them (most Secrets and ConfigMaps carry no annotation, and a map each
// was a sixth of courier's heap). Like everything in an informer cache, they
// are never modified.
var (
	keysOnly  = map[string]string{DigestedAnnotation: markKeys}
	wholeOnly = map[string]string{DigestedAnnotation: markWhole}
)

// IsDigested reports whether obj came from courier's cache with its values
// replaced by digests.
func IsDigested(obj metav1.Object) bool {
	v := obj.GetAnnotations()[DigestedAnnotation]
	return v == markKeys || v == markWhole
}

func isWhole(obj metav1.Object) bool { return obj.GetAnnotations()[DigestedAnnotation] == markWhole }

// DigestSecret replaces s's values by their digests, in place (s must be
// courier's own copy): one per key, or one for the whole content beyond
// MaxKeyDigests keys. A digested Secret is left as it is.
func DigestSecret(s *corev1.Secret) {
	if IsDigested(s) {
		return
	}
	if len(s.Data) > MaxKeyDigests {
		s.Data = map[string][]byte{"": []byte(Hash(SecretEntries(s)))}
		s.Annotations = mark(s.Annotations, markWhole)
	} else {
		data := make(map[string][]byte, len(s.Data))
		for k, v := range s.Data {
			data[k] = []byte(Digest(v))
		}
		s.Data = data
		s.Annotations = mark(s.Annotations, markKeys)
	}
	s.StringData = nil
}

// DigestConfigMap is DigestSecret for a ConfigMap (data and binaryData).
func DigestConfigMap(cm *corev1.ConfigMap) {
	if IsDigested(cm) {
		return
	}
	if len(cm.Data)+len(cm.BinaryData) > MaxKeyDigests {
		cm.Data, cm.BinaryData = map[string]string{"": Hash(ConfigMapEntries(cm))}, nil
		cm.Annotations = mark(cm.Annotations, markWhole)
		return
	}
	if cm.Data != nil {
		data := make(map[string]string, len(cm.Data))
		for k, v := range cm.Data {
			data[k] = Digest([]byte(v))
		}
		cm.Data = data
	}
	if cm.BinaryData != nil {
		bin := make(map[string][]byte, len(cm.BinaryData))
		for k, v := range cm.BinaryData {
			bin[k] = []byte(Digest(v))
		}
		cm.BinaryData = bin
	}
	cm.Annotations = mark(cm.Annotations, markKeys)
}

// mark returns annotations with DigestedAnnotation set to value, as a new
// map (the old one may be shared with the decoder's copy).
func mark(annotations map[string]string, value string) map[string]string {
	if len(annotations) == 0 || (len(annotations) == 1 && annotations[DigestedAnnotation] != "") {
		if value == markWhole {
			return wholeOnly
		}
		return keysOnly
	}
	out := make(map[string]string, len(annotations)+1)
	for k, v := range annotations {
		out[k] = v
	}
	out[DigestedAnnotation] = value
	return out
}

// SecretEntries returns the per-key digests of a Secret, full or digested;
// for one digested as a whole, its one whole-content entry.
func SecretEntries(s *corev1.Secret) []Entry {
	if isWhole(s) {
		return []Entry{{Whole: true, Digest: string(s.Data[""])}}
	}
	digested := IsDigested(s)
	out := make([]Entry, 0, len(s.Data))
	for k, v := range s.Data {
		out = append(out, Entry{Binary: true, Key: k, Digest: digestOf(v, digested)})
	}
	return out
}

// ConfigMapEntries returns the per-key digests of a ConfigMap, full or
// digested; for one digested as a whole, its one whole-content entry.
func ConfigMapEntries(cm *corev1.ConfigMap) []Entry {
	if isWhole(cm) {
		return []Entry{{Whole: true, Digest: cm.Data[""]}}
	}
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
