//go:build heapdump

package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
)

// Built only with -tags heapdump, for the e2e test that proves the heap
// holds no value of a Secret courier does not copy
// (TestUnconsumedTenantSecretsCostLittleWhateverTheirSize): a release build
// has no way to dump its heap, which holds the values of the sources it
// copies. On SIGUSR2 this build writes runtime/debug's heap dump, only live
// objects, to $COURIER_HEAPDUMP (written beside it, then renamed there).
func init() {
	path := os.Getenv("COURIER_HEAPDUMP")
	if path == "" {
		return
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR2)
	go func() {
		for range sigs {
			if err := writeHeapDump(path); err != nil {
				fmt.Fprintf(os.Stderr, "courier: heap dump: %v\n", err)
			}
		}
	}()
}

func writeHeapDump(path string) error {
	// Three collections: the second empties sync.Pools (their first moves
	// what they hold to a victim cache), the third frees what they held.
	// The dump then holds only what is reachable (and what was allocated
	// since: nothing much, the test waits for a quiet cluster).
	for range 3 {
		runtime.GC()
	}
	f, err := os.Create(path + ".part")
	if err != nil {
		return err
	}
	debug.WriteHeapDump(f.Fd())
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(path+".part", path)
}
