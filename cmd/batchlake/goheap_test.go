package main

import (
	"runtime/debug"
	"testing"
)

// TestGoHeap: a step's asks set the process's soft memory limit, restore
// puts back the limit from before the first ask, and GOMEMLIMIT wins.
func TestGoHeap(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })
	cases := []struct {
		name   string
		env    string
		during int64
	}{
		{"asks set the limit", "", 300 << 20},
		{"GOMEMLIMIT wins", "1GiB", orig},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", c.env)
			h := new(goHeap)
			h.limit(200 << 20)
			h.limit(300 << 20)
			if got := debug.SetMemoryLimit(-1); got != c.during {
				t.Errorf("limit during the step %d, want %d", got, c.during)
			}
			h.restore()
			if got := debug.SetMemoryLimit(-1); got != orig {
				t.Errorf("limit after restore %d, want %d", got, orig)
			}
		})
	}
}
