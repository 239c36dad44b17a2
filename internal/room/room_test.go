package room

import (
	"reflect"
	"testing"
)

// A map is made anew, with its entries, once it holds an eighth or less of
// the more than Above entries it held; a map that never grew past Above,
// or still holds more than an eighth, is kept.
func TestKept(t *testing.T) {
	same := func(a, b map[int]bool) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	m, peak := map[int]bool{}, 0
	for i := range 2 * Above {
		m[i] = true
		if n := Kept(m, &peak); !same(n, m) {
			t.Fatalf("a growing map was made anew at %d entries", len(m))
		}
	}
	last := 2*Above - 2*Above/8 - 1 // the key whose deletion leaves an eighth
	for i := range last {
		delete(m, i)
		if n := Kept(m, &peak); !same(n, m) {
			t.Fatalf("made anew at %d of %d entries, more than an eighth", len(m), 2*Above)
		}
	}
	delete(m, last)
	n := Kept(m, &peak)
	if same(n, m) || len(n) != len(m) || peak != len(m) {
		t.Fatalf("at %d of %d entries: made anew %v, %d entries, peak %d", len(m), 2*Above, !same(n, m), len(n), peak)
	}
	for k := range m {
		if !n[k] {
			t.Fatalf("entry %d lost", k)
		}
	}
	small, p := map[int]bool{1: true}, 0
	for range 3 {
		delete(small, 1)
		if n := Kept(small, &p); !same(n, small) {
			t.Fatal("a map that never held more than Above entries was made anew")
		}
		small[1] = true
	}
}
