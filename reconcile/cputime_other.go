//go:build !unix

package reconcile

// processUsage is not measured here: BATCHLAKE_SQL_TIMING prints zeros.
func processUsage() (cpu float64, peakMiB, faults int64) { return 0, 0, 0 }
