package main

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/batchlake/batchlake/internal/testrun"
)

// TestCommandsTakeMarkersFromTheCache: on an S3 lake, `jobs` reads each
// marker it lists (manifests, ledger events, reports) from the lake once;
// the next `jobs` with the same --cache-dir reads none of them from the lake
// and prints the same, and one with another cache folder reads them again.
func TestCommandsTakeMarkersFromTheCache(t *testing.T) {
	input, err := filepath.Abs(filepath.Join("..", "..", "testdata", "demo", "requests.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range testrun.OfflineAWS() {
		t.Setenv(k, v)
	}
	var gets atomic.Int64
	faker := gofakes3.New(s3mem.New(), gofakes3.WithAutoBucket(true), gofakes3.WithLogger(gofakes3.DiscardLog()))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, ".json") {
			gets.Add(1)
		}
		faker.Server().ServeHTTP(w, r)
	}))
	defer srv.Close()
	q := url.Values{"region": {"us-east-1"}, "endpoint": {srv.URL}, "use_path_style": {"true"}, "disable_https": {"true"},
		"response_checksum_validation": {"when_required"}, "request_checksum_calculation": {"when_required"}}
	dir := t.TempDir()
	global := func(cache string) []string {
		return []string{"--lake", "s3://lake/p?" + q.Encode(), "--tmp-dir", dir, "--cache-dir", filepath.Join(dir, cache),
			"--progress", "never", "--threads", "1"}
	}
	if code, out, errs := runCLI(append([]string{"run", "--provider", "sim", "--input", input, "--tenant", "acme",
		"--prompt-version", "v1", "--poll", "1ms"}, global("cache")...)...); code != exitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	jobs := func(cache string) (string, int64) {
		t.Helper()
		gets.Store(0)
		code, out, errs := runCLI(append([]string{"jobs"}, global(cache)...)...)
		if code != exitOK {
			t.Fatalf("jobs: exit %d\n%s", code, errs)
		}
		return out, gets.Load()
	}
	other, n := jobs("other")
	if n == 0 {
		t.Fatal("jobs with an empty cache read no marker from the lake")
	}
	first, _ := jobs("cache")
	second, n := jobs("cache")
	if n != 0 {
		t.Fatalf("jobs with the markers cached: %d marker reads from the lake, want none", n)
	}
	if first != second || first != other {
		t.Fatalf("jobs printed\n%s\nthen\n%s\nwith another cache\n%s", first, second, other)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "cache", "markers")); len(ents) < 3 {
		t.Fatalf("%d markers in the cache folder, want a manifest, a ledger event and a report at least", len(ents))
	}
	if _, n := jobs("other"); n != 0 {
		t.Fatalf("jobs again with the other cache: %d marker reads, want none", n)
	}
}
