package reconcile

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

// TestOutOfMemoryRecognised: the error DuckDB gives when a statement does not
// fit in --memory-limit is the one classify and costLines fall back on (to
// sorting in steps); other errors are not.
func TestOutOfMemoryRecognised(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	e, err := OpenEngine(l, EngineOptions{Threads: 1, MemoryLimit: "16MB", CacheDir: filepath.Join(dir, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// One list value of 20M integers (160 MB) cannot be spilled.
	err = e.Exec(ctx, "oom", []string{`CREATE TEMP TABLE big AS SELECT list(i) AS l FROM range(20000000) r(i)`})
	if !outOfMemory(err) {
		t.Fatalf("a 160 MB value under a 16MB limit: %v, want DuckDB's out-of-memory error", err)
	}
	if err := e.Exec(ctx, "syntax", []string{`SELEC 1`}); err == nil || outOfMemory(err) {
		t.Fatalf("a syntax error recognised as out of memory (or no error): %v", err)
	}
	if outOfMemory(errors.New("Out of Memory Error: not from DuckDB")) || outOfMemory(nil) {
		t.Fatal("an error that is not DuckDB's recognised as out of memory")
	}
}
