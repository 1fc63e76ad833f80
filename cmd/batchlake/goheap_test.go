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

// TestGoHeapPercent: a step's ask sets the collector's target, restore puts
// back the target from before the first ask, and GOGC wins.
func TestGoHeapPercent(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	cases := []struct {
		name   string
		env    string
		during int
	}{
		{"asks set the target", "", bulkGCPercent},
		{"GOGC wins", "200", 100},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOGC", c.env)
			h := new(goHeap)
			h.percent(75)
			h.percent(bulkGCPercent)
			if got := debug.SetGCPercent(-1); got != c.during {
				t.Errorf("target during the step %d, want %d", got, c.during)
			}
			debug.SetGCPercent(c.during)
			h.restore()
			if got := debug.SetGCPercent(100); got != 100 {
				t.Errorf("target after restore %d, want 100", got)
			}
		})
	}
}

// TestMemoryLimitPerCommand: without --memory-limit, reconcile's DuckDB gets
// the lower limit and every other command's session the higher one (at 10M
// records report and sql run out of memory at reconcile's); the flag, or
// BATCHLAKE_MEMORY_LIMIT, sets both.
func TestMemoryLimitPerCommand(t *testing.T) {
	var rf reconcileFlags
	for _, tc := range []struct{ flag, reconcile, query string }{
		{"", reconcileMemoryLimit, queryMemoryLimit},
		{"1GB", "1GB", "1GB"},
	} {
		g := &globals{memLimit: tc.flag}
		o, err := rf.options(g, "job")
		if err != nil {
			t.Fatal(err)
		}
		if got := o.Engine.MemoryLimit; got != tc.reconcile {
			t.Errorf("--memory-limit %q: reconcile's limit %q, want %q", tc.flag, got, tc.reconcile)
		}
		if got := g.engineOptions().MemoryLimit; got != tc.query {
			t.Errorf("--memory-limit %q: the sessions' limit %q, want %q", tc.flag, got, tc.query)
		}
	}
	if reconcileMemoryLimit == queryMemoryLimit {
		t.Errorf("one limit for both (%s): the queries need more than reconcile", queryMemoryLimit)
	}
}
