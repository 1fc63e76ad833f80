package main

import (
	"os"
	"runtime/debug"
)

// goHeap owns two of the process's settings of Go memory for one library
// step: the soft limit (debug.SetMemoryLimit), which the step asks for
// through its options' MemoryLimit (limit), and the collector's target
// (debug.SetGCPercent, percent). restore puts back what the process had
// before the first ask. GOMEMLIMIT and GOGC, if set, win: then the step's
// asks are ignored.
type goHeap struct {
	mem, pct knob
}

// bulkGCPercent is the collector's target for plan and ingest: their heap is
// mostly the table writers' byte buffers, which a collection does not scan,
// so collecting twice as often costs little, while every page a larger heap
// first touches is a page fault (a 1M plan or ingest peaks about 50 MiB
// lower and runs a little faster; docs/performance.md).
const bulkGCPercent = 50

func (h *goHeap) limit(bytes int64) { h.mem.ask("GOMEMLIMIT", debug.SetMemoryLimit, bytes) }

func (h *goHeap) percent(p int) { h.pct.ask("GOGC", setGCPercent, int64(p)) }

func (h *goHeap) restore() {
	h.mem.restore(debug.SetMemoryLimit)
	h.pct.restore(setGCPercent)
}

func setGCPercent(p int64) int64 { return int64(debug.SetGCPercent(int(p))) }

// knob is one runtime setting a step changes and gives back: set applies a
// value and returns the one before.
type knob struct {
	prev int64
	set  bool
}

// ask applies v unless the environment variable env is set.
func (k *knob) ask(env string, set func(int64) int64, v int64) {
	if os.Getenv(env) != "" {
		return
	}
	prev := set(v)
	if !k.set {
		k.prev, k.set = prev, true
	}
}

func (k *knob) restore(set func(int64) int64) {
	if k.set {
		set(k.prev)
		k.set = false
	}
}
