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
	if p := os.Getenv("BATCHLAKE_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "batchlake: cpu profile: %v\n", err)
		} else {
			stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
		}
	}
	if p := os.Getenv("BATCHLAKE_TRACE"); p != "" {
		f, err := os.Create(p)
		if err == nil {
			err = trace.Start(f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "batchlake: trace: %v\n", err)
		} else {
			stops = append(stops, func() { trace.Stop(); f.Close() })
		}
	}
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
