package reconcile

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/internal/duckalloc"
	"github.com/batchlake/batchlake/internal/testrun"
	"github.com/batchlake/batchlake/lake"
)

func TestParseMemoryLimit(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"", math.MaxInt64, true},
		{"384MB", 384e6, true},
		{"384 MB", 384e6, true},
		{"512mb", 512e6, true},
		{"1GB", 1e9, true},
		{"1.5GB", 1.5e9, true},
		{"128MiB", 128 << 20, true},
		{"2 GiB", 2 << 30, true},
		{"100KB", 1e5, true},
		{"4096", 4096, true},
		{"10 bytes", 10, true},
		{"80%", 0, false},
		{"lots", 0, false},
		{"12 parsecs", 0, false},
		{"1e30GB", 0, false},
	}
	for _, c := range cases {
		got, ok := parseMemoryLimit(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("parseMemoryLimit(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestLowerMemoryLimit: a session's DuckDB limit is lowered to the asked
// size only from above; a lower limit stays what the user set.
func TestLowerMemoryLimit(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	cases := []struct{ set, want string }{
		{"1GB", "128.0 MiB"},
		{"", "128.0 MiB"},
		{"64MB", "61.0 MiB"},
		{"128MiB", "128.0 MiB"},
	}
	for _, c := range cases {
		t.Run(c.set, func(t *testing.T) {
			e, err := OpenEngine(l, EngineOptions{Threads: 1, MemoryLimit: c.set, TempDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			before := sessionLimit(t, e)
			if err := e.lowerMemoryLimit(ctx, retryMemoryLimit); err != nil {
				t.Fatal(err)
			}
			got := sessionLimit(t, e)
			if got != c.want {
				t.Errorf("--memory-limit %q: %s after lowering (was %s), want %s", c.set, got, before, c.want)
			}
		})
	}
}

// sessionLimit is the session's DuckDB memory limit, as DuckDB prints it.
func sessionLimit(t *testing.T, e *Engine) string {
	t.Helper()
	var v string
	if err := e.DB.QueryRowContext(context.Background(), "SELECT current_setting('memory_limit')").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestQueryOutOfMemoryIsNotBadInput: a query that runs out of DuckDB's
// memory limit fails as an error (exit 1: the same query fits a higher
// limit), naming the flag to raise, not as bad input (exit 2).
func TestQueryOutOfMemoryIsNotBadInput(t *testing.T) {
	ctx := context.Background()
	e, _, _ := reconciledSessionWith(t, EngineOptions{Threads: 1, MemoryLimit: "16MB"})
	// A list aggregate holds its values in memory and cannot spill.
	_, err := e.Query(ctx, "SELECT len(list(i)) FROM range(20000000) t(i)")
	if err == nil || errors.Is(err, errkind.ErrBadInput) || !strings.Contains(err.Error(), "--memory-limit") {
		t.Errorf("error %v: want an error that is not bad input and names --memory-limit", err)
	}
	// A query DuckDB refuses is still bad input.
	if _, err := e.Query(ctx, "SELECT no_such_column FROM records"); !errors.Is(err, errkind.ErrBadInput) {
		t.Errorf("error %v: want bad input", err)
	}
}

// TestMemoryLimitNotASize: a memory limit DuckDB does not read as a size is
// bad input (exit 2: running the step again gives the same answer), naming
// the setting; one it reads opens the session.
func TestMemoryLimitNotASize(t *testing.T) {
	l, _ := testLake(t)
	for _, c := range []struct {
		limit string
		bad   bool
	}{{"nonsense", true}, {"12 parsecs", true}, {"1.5GiB", false}, {"300MB", false}} {
		e, err := OpenEngine(l, EngineOptions{Threads: 1, MemoryLimit: c.limit, TempDir: t.TempDir()})
		if !c.bad {
			if err != nil {
				t.Errorf("memory limit %q: %v", c.limit, err)
			} else {
				e.Close()
			}
			continue
		}
		if !errors.Is(err, errkind.ErrBadInput) || !strings.Contains(err.Error(), `memory limit "`+c.limit+`": not a size DuckDB reads`) {
			t.Errorf("memory limit %q: %v, want bad input naming it", c.limit, err)
		}
	}
}

// TestReleaseMemory: the pages DuckDB's allocator keeps freed after a
// statement go back to the kernel when the session releases its memory, and
// the session's limit stays what it was (to the KiB).
func TestReleaseMemory(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	for _, set := range []string{"384MB", "1.5GB"} {
		t.Run(set, func(t *testing.T) {
			e, err := OpenEngine(l, EngineOptions{Threads: 2, MemoryLimit: set, TempDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			dirty := func() int64 {
				n, ok := duckalloc.DirtyBytes()
				if !ok {
					testrun.CheckAllocator(t) // skips where DuckDB has no jemalloc
					t.Fatal("DuckDB's jemalloc keeps no statistics")
				}
				return n
			}
			before := sessionLimit(t, e)
			// A hash table of 3 million integers, freed when the
			// statement ends. How much of it the allocator keeps varies
			// from run to run, so the test asks for four times what it
			// lets the release leave.
			var n int64
			if err := e.DB.QueryRowContext(ctx, "SELECT count(DISTINCT i) FROM range(3000000) t(i)").Scan(&n); err != nil || n != 3000000 {
				t.Fatalf("count %d, %v", n, err)
			}
			kept := dirty()
			if kept < 16<<20 {
				t.Fatalf("DuckDB's allocator keeps %d bytes freed after the statement: the test needs more", kept)
			}
			if err := e.releaseMemory(ctx); err != nil {
				t.Fatal(err)
			}
			if left := dirty(); left > 4<<20 {
				t.Errorf("--memory-limit %q: %d bytes still kept freed after releasing %d", set, left, kept)
			}
			if got := sessionLimit(t, e); got != before {
				t.Errorf("--memory-limit %q: %s after releasing, was %s", set, got, before)
			}
		})
	}
}

// TestTablesPassStartsWithDuckDBMemoryReleased: by the time the outcomes and
// costs tables are written, a job's or a partition's, DuckDB's allocator has
// given back the pages its statements freed (some 50 MB of them even for a
// small job), for the Go side to take again. Not parallel: the allocator's
// count is the process's, and other tests' sessions free memory too.
func TestTablesPassStartsWithDuckDBMemoryReleased(t *testing.T) {
	ctx := context.Background()
	g := generate(rand.New(rand.NewPCG(5, 9)), 400, 3, 2)
	l, dir := testLake(t)
	m := planAndIngest(t, l, dir, g, 100)
	for _, part := range []*lake.Partition{nil, {K: 1, N: 2}} {
		kept, ok := int64(-1), false
		o := Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 2, MemoryLimit: "384MB"},
			tablesStart: func() { kept, ok = duckalloc.DirtyBytes() }}
		name, err := "the job", error(nil)
		if part == nil {
			_, err = Run(ctx, l, o)
		} else {
			name = "partition " + part.String()
			_, err = RunPartition(ctx, l, o, *part)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			testrun.CheckAllocator(t)
			t.Fatal("DuckDB's jemalloc keeps no statistics")
		}
		if kept > 4<<20 {
			t.Errorf("%s: DuckDB's allocator keeps %d bytes freed as the tables' pass starts, want them given back", name, kept)
		}
	}
}
