package objmeta

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pairs is a small string map (labels, annotations) held as its keys and
// values, key, value, key, value…, in key order, with their strings shared
// (Intern). A Go map costs some 300 bytes even with two entries; the pairs
// of a replica's two labels and three annotations cost 160. Read one with
// Get; Map builds a map for code that needs one (a new map each time:
// changing it changes nothing cached).
type Pairs []string

// PairsOf is m as Pairs (nil if m is empty).
func PairsOf(m map[string]string) Pairs {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	p := make(Pairs, 0, 2*len(m))
	for _, k := range keys {
		p = append(p, Intern(k), Intern(m[k]))
	}
	return p
}

// Get is the value of key, and whether p has it.
func (p Pairs) Get(key string) (string, bool) {
	for i := 0; i < len(p); i += 2 {
		switch c := strings.Compare(p[i], key); {
		case c == 0:
			return p[i+1], true
		case c > 0:
			return "", false
		}
	}
	return "", false
}

// Len is how many keys p has.
func (p Pairs) Len() int { return len(p) / 2 }

// Map is p as a new map (nil if p is empty).
func (p Pairs) Map() map[string]string {
	if len(p) == 0 {
		return nil
	}
	m := make(map[string]string, len(p)/2)
	for i := 0; i < len(p); i += 2 {
		m[p[i]] = p[i+1]
	}
	return m
}

// annotated is an object that can read one annotation or label without
// building a map (a Meta, and what embeds one).
type annotated interface {
	Annotation(key string) (string, bool)
	Label(key string) (string, bool)
}

// Annotation is m's annotation key, read without building a map when m
// holds its annotations as Pairs.
func Annotation(m metav1.Object, key string) (string, bool) {
	if a, ok := m.(annotated); ok {
		return a.Annotation(key)
	}
	v, ok := m.GetAnnotations()[key]
	return v, ok
}

// Label is m's label key, read as Annotation reads an annotation.
func Label(m metav1.Object, key string) (string, bool) {
	if a, ok := m.(annotated); ok {
		return a.Label(key)
	}
	v, ok := m.GetLabels()[key]
	return v, ok
}
