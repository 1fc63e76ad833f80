//go:build unix

package reconcile

import "syscall"

// processCPU is the process's user + system CPU time so far, in seconds
// (every thread's, DuckDB's included), for BATCHLAKE_SQL_TIMING.
func processCPU() float64 {
	var r syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &r) != nil {
		return 0
	}
	return float64(r.Utime.Sec+r.Stime.Sec) + float64(r.Utime.Usec+r.Stime.Usec)/1e6
}
