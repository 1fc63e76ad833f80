//go:build !unix

package reconcile

// processCPU is not measured here: BATCHLAKE_SQL_TIMING prints 0.
func processCPU() float64 { return 0 }
