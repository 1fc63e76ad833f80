//go:build unix

package reconcile

import (
	"runtime"
	"syscall"
)

// processUsage is the process's user + system CPU time so far, in seconds
// (every thread's, DuckDB's included), its peak resident memory in MiB
// (ru_maxrss) and its minor page faults so far, for BATCHLAKE_SQL_TIMING.
func processUsage() (cpu float64, peakMiB, faults int64) {
	var r syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &r) != nil {
		return 0, 0, 0
	}
	peak := int64(r.Maxrss) >> 10 // KiB on Linux
	if runtime.GOOS == "darwin" {
		peak >>= 10 // bytes there
	}
	return float64(r.Utime.Sec+r.Stime.Sec) + float64(r.Utime.Usec+r.Stime.Usec)/1e6, peak, int64(r.Minflt)
}
