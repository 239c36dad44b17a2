// Package heap measures the Go heap for the tests and benchmarks that hold
// courier's memory to account.
package heap

import "runtime"

// Live is the heap in use after a garbage collection: what is still
// reachable, in bytes.
func Live() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
