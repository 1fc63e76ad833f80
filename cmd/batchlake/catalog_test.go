package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCatalogCommand: catalog says which kind it wrote and where to open it
// from, --help says how it resolves paths, and --refresh rebuilds only a
// catalog of the same lake (anything else is bad usage, exit 2).
func TestCatalogCommand(t *testing.T) {
	t.Parallel()
	lk, _ := demoLake(t)
	dir := filepath.Dir(lk)
	out := filepath.Join(dir, "analytics.duckdb")
	code, res := cli(t, "catalog", "--lake", lk, "--out", out)
	if code != exitOK || res["kind"] != "live" || res["lake"] != "lake" || res["open_from"] != dir {
		t.Fatalf("catalog: exit %d %v; want a live catalog reading lake from %s", code, res, dir)
	}
	code, res = cli(t, "catalog", "--lake", lk, "--out", out, "--refresh")
	if code != exitOK || res["refreshed"] != true {
		t.Fatalf("catalog --refresh: exit %d %v", code, res)
	}
	other, _ := demoLake(t)
	notCatalog := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notCatalog, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		says string
	}{
		{"another lake", []string{"--lake", other, "--out", out, "--refresh"}, "not of"},
		{"no catalog there", []string{"--lake", lk, "--out", filepath.Join(dir, "none.duckdb"), "--refresh"}, "write it first"},
		{"not a catalog", []string{"--lake", lk, "--out", notCatalog, "--refresh"}, "not a catalog"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(append([]string{"catalog"}, c.args...), &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String()+stdout.String(), c.says) {
				t.Errorf("exit %d, want %d saying %q:\n%s%s", code, exitUsage, c.says, stdout.String(), stderr.String())
			}
		})
	}
	if b, _ := os.ReadFile(notCatalog); string(b) != "hello\n" {
		t.Errorf("--refresh of a file that is no catalog changed it: %q", b)
	}
	var help, errb bytes.Buffer
	run([]string{"catalog", "--help"}, &help, &errb)
	for _, want := range []string{"live", "snapshot", "relative", "current directory", "--refresh"} {
		if !strings.Contains(help.String()+errb.String(), want) {
			t.Errorf("catalog --help does not say %q", want)
		}
	}
}
