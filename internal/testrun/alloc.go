package testrun

import (
	"os"
	"runtime"
	"testing"

	"github.com/batchlake/batchlake/internal/duckalloc"
	// The binary's mmap, which advises huge pages for large mappings.
	_ "github.com/batchlake/batchlake/internal/hugepages"
)

// Every test binary that imports this package allocates DuckDB's memory as
// the batchlake binary does (duckalloc: freed pages kept three seconds before
// they go back to the kernel), so that its reconciles and queries run as
// they do in production; with DuckDB's own one second, the reconcile tests
// took about 8 % more cpu, giving pages back and faulting them in again. It
// maps memory as the binary does too (hugepages): without, each of DuckDB's
// hash tables, cleared for every aggregate, faulted in 4 KiB at a time, and
// the reconcile package's tests took 65.0-72.5 s against 59.5-64.8.

// CheckAllocator fails t unless DuckDB's allocator runs with duckalloc's
// settings (or with DUCKDB_JE_MALLOC_CONF's, when that is set). It skips
// where DuckDB brings no jemalloc.
func CheckAllocator(t testing.TB) {
	t.Helper()
	dirty, muzzy, ok := duckalloc.Settings()
	if !ok {
		if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
			t.Fatal("DuckDB's jemalloc settings cannot be read, yet its Linux x86-64 library bundles jemalloc (is DuckDB linked into this binary?)")
		}
		t.Skip("DuckDB allocates without its jemalloc on " + runtime.GOOS + "/" + runtime.GOARCH)
	}
	if os.Getenv("DUCKDB_JE_MALLOC_CONF") == "" && (dirty != duckalloc.DirtyDecayMS || muzzy != duckalloc.MuzzyDecayMS) {
		t.Errorf("DuckDB's allocator in this process: dirty decay %d ms, muzzy %d ms; want %d and %d (internal/duckalloc)",
			dirty, muzzy, duckalloc.DirtyDecayMS, duckalloc.MuzzyDecayMS)
	}
}
