package main

import (
	"os"
	"runtime/debug"
)

// goHeap owns the process's soft limit on Go memory (debug.SetMemoryLimit)
// for one library step: the step asks for a limit through its options'
// MemoryLimit (limit), and restore puts back the limit the process had
// before. GOMEMLIMIT, if set, wins: then the step's asks are ignored.
type goHeap struct {
	prev int64
	set  bool
}

func (h *goHeap) limit(bytes int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	prev := debug.SetMemoryLimit(bytes)
	if !h.set {
		h.prev, h.set = prev, true
	}
}

func (h *goHeap) restore() {
	if h.set {
		debug.SetMemoryLimit(h.prev)
		h.set = false
	}
}
