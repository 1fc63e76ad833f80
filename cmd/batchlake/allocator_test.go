package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/batchlake/batchlake/internal/testrun"
)

// TestDuckDBAllocatorSettings: where DuckDB brings its jemalloc (the bundled
// Linux x86-64 library), freed pages wait three seconds before they go back to
// the kernel, and --version says so; DUCKDB_JE_MALLOC_CONF, when set, wins.
func TestDuckDBAllocatorSettings(t *testing.T) {
	testrun.CheckAllocator(t)

	// jemalloc reads its settings as the process loads: a new process each.
	cases := []struct {
		env  string
		want string
	}{
		{"", "jemalloc dirty_decay_ms=3000 muzzy_decay_ms=0"},
		{"dirty_decay_ms:2000,muzzy_decay_ms:500", "jemalloc dirty_decay_ms=2000 muzzy_decay_ms=500"},
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), cliName) // this test binary, run as batchlake (TestMain)
	if err := os.Symlink(self, bin); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		cmd := exec.Command(bin, "--version")
		cmd.Env = environWithout("DUCKDB_JE_MALLOC_CONF")
		if c.env != "" {
			cmd.Env = append(cmd.Env, "DUCKDB_JE_MALLOC_CONF="+c.env)
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("DUCKDB_JE_MALLOC_CONF=%q: %v\n%s", c.env, err, out)
		}
		var v versionInfo
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("DUCKDB_JE_MALLOC_CONF=%q: %v\n%s", c.env, err, out)
		}
		if v.DuckDBAllocator != c.want {
			t.Errorf("DUCKDB_JE_MALLOC_CONF=%q: duckdb_allocator %q, want %q", c.env, v.DuckDBAllocator, c.want)
		}
	}
}
