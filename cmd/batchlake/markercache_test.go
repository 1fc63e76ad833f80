package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/batchlake/batchlake/internal/testrun"
	"github.com/batchlake/batchlake/lake"
)

// markerReads is how many JSON markers the watched S3 server was asked for
// since the last Reset.
func markerReads(w *testrun.LakeWatch) int {
	n := 0
	for _, r := range w.Arrived() {
		if strings.HasPrefix(r, http.MethodGet+" ") && strings.HasSuffix(r, ".json") {
			n++
		}
	}
	return n
}

// countedS3Lake starts an S3 server on loopback whose requests w watches,
// runs the demo input through `run --provider sim` into a lake there, and
// returns the global flags of a command on that lake with its cache in
// dir/cache (the caller's name for the folder).
func countedS3Lake(t *testing.T, w *testrun.LakeWatch) (dir string, global func(cache string) []string) {
	t.Helper()
	for k, v := range testrun.OfflineAWS() {
		t.Setenv(k, v)
	}
	faker := gofakes3.New(s3mem.New(), gofakes3.WithAutoBucket(true), gofakes3.WithLogger(gofakes3.DiscardLog()))
	srv := httptest.NewServer(w.Wrap(faker.Server()))
	t.Cleanup(srv.Close)
	q := url.Values{"region": {"us-east-1"}, "endpoint": {srv.URL}, "use_path_style": {"true"}, "disable_https": {"true"},
		"response_checksum_validation": {"when_required"}, "request_checksum_calculation": {"when_required"}}
	dir = t.TempDir()
	global = func(cache string) []string {
		return []string{"--lake", "s3://lake/p?" + q.Encode(), "--tmp-dir", dir, "--cache-dir", filepath.Join(dir, cache),
			"--progress", "never", "--threads", "1"}
	}
	if code, out, errs := runCLI(append([]string{"run", "--provider", "sim", "--input", demoInput, "--tenant", "acme",
		"--prompt-version", "v1", "--poll", "1ms"}, global("cache")...)...); code != exitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	return dir, global
}

// TestCommandsTakeMarkersFromTheCache: on an S3 lake, `jobs` reads each
// marker it lists (manifests, ledger events, reports) from the lake once;
// the next `jobs` with the same --cache-dir reads none of them from the lake
// and prints the same, and one with another cache folder reads them again.
func TestCommandsTakeMarkersFromTheCache(t *testing.T) {
	w := testrun.NewLakeWatch()
	dir, global := countedS3Lake(t, w)
	jobs := func(cache string) (string, int) {
		t.Helper()
		w.Reset("", "", "")
		code, out, errs := runCLI(append([]string{"jobs"}, global(cache)...)...)
		if code != exitOK {
			t.Fatalf("jobs: exit %d\n%s", code, errs)
		}
		return out, markerReads(w)
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

// TestJobsOnS3ListsTheLakeOnce: on an S3 lake, `jobs` lists the ledgers
// and the reports of every job at once, not a request a shard and a job,
// reads more jobs at once than on a local lake, and says what the lake's own
// views say of each job's state and cost.
func TestJobsOnS3ListsTheLakeOnce(t *testing.T) {
	w := testrun.NewLakeWatch()
	_, global := countedS3Lake(t, w)
	// A second job of many shards, planned only.
	if code, out, errs := runCLI(append([]string{"plan", "--provider", "sim", "--input", demoInput, "--tenant", "beta",
		"--prompt-version", "v2", "--shard-max-records", "40"}, global("cache")...)...); code != exitOK {
		t.Fatalf("plan: exit %d\n%s\n%s", code, out, errs)
	}
	// Seven more jobs of the demo's first records, planned only: more jobs
	// than a local lake's reads at once.
	lines, err := os.ReadFile(demoInput)
	if err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(t.TempDir(), "small.jsonl")
	if err := os.WriteFile(small, []byte(strings.Join(strings.SplitAfter(string(lines), "\n")[:3], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		if code, out, errs := runCLI(append([]string{"plan", "--provider", "sim", "--input", small, "--tenant", "beta",
			"--prompt-version", fmt.Sprint("small-", i)}, global("cache")...)...); code != exitOK {
			t.Fatalf("plan: exit %d\n%s\n%s", code, out, errs)
		}
	}
	w.ResetN(http.MethodGet, "manifests/", ".json", 9)
	code, out, errs := runCLI(append([]string{"jobs"}, global("empty")...)...) // every manifest read from the lake
	if code != exitOK {
		t.Fatalf("jobs: exit %d\n%s", code, errs)
	}
	if !w.Overlapped() {
		t.Error("jobs never had 9 manifests in flight at once")
	}
	// Never a shard's ledger or a job's reports on their own (the manifests
	// are listed once to find the jobs and once to see the lake has any).
	l := w.Listed()
	for _, p := range l {
		if p != lake.ManifestPrefix && p != lake.LedgerArea && p != lake.ReportArea {
			t.Errorf("jobs listed %q (all: %q), want only the manifests, the ledgers and the reports", p, l)
		}
	}
	if slices.Index(l, lake.LedgerArea) < 0 || slices.Index(l, lake.ReportArea) < 0 || len(l) > 4 {
		t.Errorf("jobs listed %q, want the ledgers and the reports once each", l)
	}
	var list struct {
		Jobs []jobRow `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("jobs: %v\n%s", err, out)
	}
	shards := 0
	for _, j := range list.Jobs {
		shards += j.Shards
	}
	if len(list.Jobs) < 9 || shards < 17 {
		t.Fatalf("%d jobs of %d shards in all, want the run's, the 8-shard plan's and seven of one shard:\n%s", len(list.Jobs), shards, out)
	}
	states := sqlRowsWith(t, "SELECT job_key, max_by(state, seq) AS state FROM ledger GROUP BY job_key, shard_id", global("cache")...)
	costs := sqlRowsWith(t, "SELECT job_key, CAST(sum(cost_usd) AS VARCHAR) AS usd FROM costs GROUP BY job_key", global("cache")...)
	for _, j := range list.Jobs {
		var shardStates []lake.State
		for _, r := range states {
			if r["job_key"] == j.JobKey {
				shardStates = append(shardStates, lake.State(r["state"].(string)))
			}
		}
		if want := lake.JobState(shardStates); j.State != want || len(shardStates) != j.Shards {
			t.Errorf("job %s: state %s of %d shards, the ledger view says %s of %d", j.JobKey[:12], j.State, j.Shards, want, len(shardStates))
		}
		var usd string
		for _, r := range costs {
			if r["job_key"] == j.JobKey {
				usd = r["usd"].(string)
			}
		}
		switch {
		case j.Cost == nil && usd != "":
			t.Errorf("job %s: no cost, the costs view says %s", j.JobKey[:12], usd)
		case j.Cost != nil && !sameDecimal(j.Cost.TotalUSD.String(), usd):
			t.Errorf("job %s: cost %s, the costs view says %s", j.JobKey[:12], j.Cost.TotalUSD, usd)
		}
	}
}
