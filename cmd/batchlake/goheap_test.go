package main

import (
	"fmt"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
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
	rf := reconcileFlags{maxAttempts: 3} // the flag's default
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

// TestBulkStepsCollectAtBulkPercent: the plan and ingest commands, and run's
// plan, run the collector at bulkGCPercent while they work and give the
// process its target back when they end. The target is sampled (read-only,
// runtime/metrics) every 100 µs while each command runs in this process.
func TestBulkStepsCollectAtBulkPercent(t *testing.T) {
	t.Setenv("GOGC", "")
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	var in, out strings.Builder
	for i := range 2000 {
		id := fmt.Sprintf("bulk-%05d", i)
		in.WriteString(requestLine(id, fmt.Sprintf("Summarise item %d in one line.", i)) + "\n")
		out.WriteString(successLine(id, 40, 3, "billing") + "\n")
	}
	input, output := writeFile(t, "input.jsonl", []byte(in.String())), writeFile(t, "output.jsonl", []byte(out.String()))
	dir := t.TempDir()
	planLake, runLake := filepath.Join(dir, "lake"), filepath.Join(dir, "runlake")
	job := ""
	steps := []struct {
		name string
		args func() []string
	}{
		{"plan", func() []string {
			return []string{"plan", "--lake", planLake, "--provider", "openai", "--input", input, "--tenant", "acme", "--prompt-version", "v1", "--progress", "never"}
		}},
		{"ingest", func() []string { return []string{"ingest", "--lake", planLake, "--job", job, "--output", output} }},
		{"run", func() []string {
			return []string{"run", "--lake", runLake, "--provider", "sim", "--input", input, "--tenant", "acme", "--prompt-version", "v1",
				"--poll", "10ms", "--sim-lost-creates", "0", "--progress", "never"}
		}},
	}
	for _, s := range steps {
		least := make(chan int64)
		stop := make(chan struct{})
		go func() {
			m := []metrics.Sample{{Name: "/gc/gogc:percent"}}
			low := int64(-1)
			for {
				metrics.Read(m)
				if v := int64(m[0].Value.Uint64()); low < 0 || v < low {
					low = v
				}
				select {
				case <-stop:
					least <- low
					return
				case <-time.After(100 * time.Microsecond):
				}
			}
		}()
		code, res := cli(t, s.args()...)
		close(stop)
		low := <-least
		if code != exitOK && code != exitPartial {
			t.Fatalf("%s: exit %d: %v", s.name, code, res)
		}
		if s.name == "plan" {
			job, _ = res["job_key"].(string)
		}
		if low != bulkGCPercent {
			t.Errorf("%s: least collector target seen while it ran %d, want %d", s.name, low, bulkGCPercent)
		}
		if got := debug.SetGCPercent(100); got != 100 {
			t.Errorf("%s: target after the command %d, want 100 back", s.name, got)
		}
	}
}
