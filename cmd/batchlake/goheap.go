package main

import (
	"os"
	"runtime/debug"
)

// goHeap owns the process's soft limit on Go memory (debug.SetMemoryLimit)
// for one library step: the step asks for a limit through its options'
// MemoryLimit (limit), and restore puts back the limit the process had
// before. GOMEMLIMIT, if set, wins: then the step's asks are ignored. It
// owns the collector's target (percent, debug.SetGCPercent) the same way,
// GOGC winning.
type goHeap struct {
	prev       int64
	set        bool
	prevPct    int
	setPercent bool
}

// bulkGCPercent is the collector's target for plan and ingest: their heap is
// mostly the table writers' byte buffers, which a collection does not scan,
// so collecting twice as often costs little, while every page a larger heap
// first touches is a page fault (a 1M plan or ingest peaks about 45 MiB
// lower and runs a little faster; docs/performance.md).
const bulkGCPercent = 50

func (h *goHeap) limit(bytes int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	prev := debug.SetMemoryLimit(bytes)
	if !h.set {
		h.prev, h.set = prev, true
	}
}

// percent sets the collector's target (GOGC) for the step, unless GOGC is
// set.
func (h *goHeap) percent(p int) {
	if os.Getenv("GOGC") != "" {
		return
	}
	prev := debug.SetGCPercent(p)
	if !h.setPercent {
		h.prevPct, h.setPercent = prev, true
	}
}

func (h *goHeap) restore() {
	if h.set {
		debug.SetMemoryLimit(h.prev)
		h.set = false
	}
	if h.setPercent {
		debug.SetGCPercent(h.prevPct)
		h.setPercent = false
	}
}
