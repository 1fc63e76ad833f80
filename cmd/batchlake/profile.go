package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// startProfiles writes a CPU profile to $BATCHLAKE_CPUPROFILE, an execution
// trace (which goroutine ran, waited or blocked when) to $BATCHLAKE_TRACE
// and, when the returned stop runs, a heap profile to $BATCHLAKE_MEMPROFILE
// (for bench/run.sh and performance work; off unless the variables are set).
func startProfiles(stderr io.Writer) (stop func()) {
	var stops []func()
	// record writes to the file named by $env from begin until end.
	record := func(env, what string, begin func(io.Writer) error, end func()) {
		p := os.Getenv(env)
		if p == "" {
			return
		}
		f, err := os.Create(p)
		if err == nil {
			if err = begin(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "batchlake: %s: %v\n", what, err)
			return
		}
		stops = append(stops, func() { end(); f.Close() })
	}
	record("BATCHLAKE_CPUPROFILE", "cpu profile", pprof.StartCPUProfile, pprof.StopCPUProfile)
	record("BATCHLAKE_TRACE", "trace", trace.Start, trace.Stop)
	if p := os.Getenv("BATCHLAKE_MEMPROFILE"); p != "" {
		runtime.MemProfileRate = 64 << 10
		stops = append(stops, func() {
			f, err := os.Create(p)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
			if err != nil {
				fmt.Fprintf(stderr, "batchlake: heap profile: %v\n", err)
			}
		})
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}
