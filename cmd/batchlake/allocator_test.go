package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
	bin := versionBinary(t)
	for _, c := range cases {
		env := environWithout("DUCKDB_JE_MALLOC_CONF")
		if c.env != "" {
			env = append(env, "DUCKDB_JE_MALLOC_CONF="+c.env)
		}
		v := runVersion(t, bin, env)
		if v.DuckDBAllocator != c.want {
			t.Errorf("DUCKDB_JE_MALLOC_CONF=%q: duckdb_allocator %q, want %q", c.env, v.DuckDBAllocator, c.want)
		}
	}
}

// TestHugePagesSetting: large anonymous mappings are advised to use huge
// pages unless BATCHLAKE_HUGEPAGES turns it off, and --version says which.
func TestHugePagesSetting(t *testing.T) {
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skip("huge page advice is built on Linux x86-64 and arm64 only")
	}
	bin := versionBinary(t)
	for _, c := range []struct{ env, want string }{
		{"", "advised"},
		{"BATCHLAKE_HUGEPAGES=1", "advised"},
		{"BATCHLAKE_HUGEPAGES=0", "off"},
	} {
		env := environWithout("BATCHLAKE_HUGEPAGES")
		if c.env != "" {
			env = append(env, c.env)
		}
		v := runVersion(t, bin, env)
		if v.HugePages != c.want {
			t.Errorf("%q: huge_pages %q, want %q", c.env, v.HugePages, c.want)
		}
	}
}

// versionBinary links this test binary as batchlake (TestMain), for settings
// read as the process starts: a new process each.
func versionBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), cliName)
	if err := os.Symlink(self, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// runVersion runs bin --version in env and decodes what it prints.
func runVersion(t *testing.T, bin string, env []string) versionInfo {
	t.Helper()
	cmd := exec.Command(bin, "--version")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	var v versionInfo
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	return v
}
