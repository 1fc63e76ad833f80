package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
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

// The start times in GODEBUG's init and collection traces.
var (
	initAt = regexp.MustCompile(`init \S+ @([0-9.]+) ms, `)
	gcAt   = regexp.MustCompile(`gc [0-9]+ @([0-9.]+)s `)
)

// TestNoCollectionWhileStarting: the packages' init functions allocate past
// the collector's first goal, yet the process collects nothing before main
// (internal/startup); with GOGC set in the environment the package stays
// out of the way, and the collections during init show (which also shows
// that the trace is read right).
func TestNoCollectionWhileStarting(t *testing.T) {
	bin := versionBinary(t)
	// duringInit runs --version with the runtime's traces of package inits
	// and collections, and counts the collections that started before the
	// last init did. By their start times, not the lines' order: a
	// collection's line is printed when it ends, which on a busy machine can
	// be after the last init's line.
	duringInit := func(env ...string) int {
		t.Helper()
		cmd := exec.Command(bin, "--version")
		cmd.Env = append(environWithout("GOGC", "GODEBUG"), append(env, "GODEBUG=gctrace=1,inittrace=1")...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("--version: %v\n%s", err, stderr.Bytes())
		}
		// "init main @52 ms, 0.01 ms clock, ..." and "gc 1 @0.012s 2%: ...",
		// found anywhere: the runtime writes an init line in pieces, and a
		// collection's line can land in the middle of one.
		lastInit := -1.0 // ms
		for _, m := range initAt.FindAllStringSubmatch(stderr.String(), -1) {
			at, _ := strconv.ParseFloat(m[1], 64)
			lastInit = max(lastInit, at)
		}
		if lastInit < 0 {
			t.Fatalf("no init trace in --version's stderr:\n%s", stderr.Bytes())
		}
		var gcs []float64 // ms
		for _, m := range gcAt.FindAllStringSubmatch(stderr.String(), -1) {
			at, _ := strconv.ParseFloat(m[1], 64)
			gcs = append(gcs, at*1000)
		}
		n := 0
		for _, at := range gcs {
			if at < lastInit {
				n++
			}
		}
		return n
	}
	if n := duringInit(); n != 0 {
		t.Errorf("%d collections before main, want none", n)
	}
	if n := duringInit("GOGC=100"); n == 0 {
		t.Errorf("GOGC=100: no collection before main; the inits allocate past the first goal, so GOGC was not left to the user")
	}
}
