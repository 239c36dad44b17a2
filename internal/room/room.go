// Package room keeps a Go map from holding the room of its busiest moment:
// a map never shrinks by itself, and a start, or a source update to
// thousands of replicas, puts thousands of keys in maps that hold a handful
// once it is over.
package room

import "maps"

// Above is the size past which a map that emptied is made anew.
const Above = 1024

// Kept is m, or a copy of it in a new map when it holds an eighth or less of
// the more than Above entries it once held; peak is the most m held since
// it was made (the caller keeps it beside m). Call it after each change of
// m.
func Kept[K comparable, V any](m map[K]V, peak *int) map[K]V {
	*peak = max(*peak, len(m))
	if *peak <= Above || len(m) > *peak/8 {
		return m
	}
	*peak = len(m)
	n := make(map[K]V, len(m)) // not maps.Clone, which keeps m's room
	maps.Copy(n, m)
	return n
}
