package reconcile

import (
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

func TestEngineThreadsForJobSize(t *testing.T) {
	cases := []struct {
		threads int
		records int64
		want    int
	}{
		{0, 0, 1},
		{0, 300, 1},
		{0, smallJobRecords - 1, 1},
		{0, smallJobRecords, 0}, // all cores
		{0, 10_000_000, 0},
		{2, 300, 2}, // --threads wins either way
		{1, 10_000_000, 1},
		{4, smallJobRecords, 4},
	}
	for _, c := range cases {
		if got := (EngineOptions{Threads: c.threads}).forRecords(c.records).Threads; got != c.want {
			t.Errorf("threads %d, %d records: %d threads, want %d", c.threads, c.records, got, c.want)
		}
	}
}

// TestSmallJobReconcilesOnOneThread: a reconcile, a partition and a merge of
// a small job open DuckDB on one thread unless Threads says otherwise.
func TestSmallJobReconcilesOnOneThread(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one core: every session runs one thread whatever the job's size")
	}
	ctx := context.Background()
	g := generate(rand.New(rand.NewPCG(3, 9)), 40, 1, 1)
	var mu sync.Mutex
	var opened []int
	// What DuckDB itself was given, not what OpenEngine meant to give it.
	onOpen := func(e *Engine) {
		var n int
		if err := e.DB.QueryRow("SELECT current_setting('threads')").Scan(&n); err != nil {
			t.Errorf("reading DuckDB's threads: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		opened = append(opened, n)
	}
	took := func(t *testing.T, want ...int) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(opened, want) {
			t.Errorf("DuckDB sessions opened with %v threads, want %v", opened, want)
		}
		opened = nil
	}

	l, dir := testLake(t)
	m := planAndIngest(t, l, dir, g, 0)
	if _, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{OnOpen: onOpen}}); err != nil {
		t.Fatal(err)
	}
	took(t, 1)

	l, dir = testLake(t)
	m = planAndIngest(t, l, dir, g, 0)
	if _, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 2, OnOpen: onOpen}}); err != nil {
		t.Fatal(err)
	}
	took(t, 2)

	l, dir = testLake(t)
	m = planAndIngest(t, l, dir, g, 0)
	o := Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{OnOpen: onOpen}}
	for k := range 2 {
		if _, err := RunPartition(ctx, l, o, lake.Partition{K: k, N: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Merge(ctx, l, o, 2); err != nil {
		t.Fatal(err)
	}
	took(t, 1, 1, 1)
}
