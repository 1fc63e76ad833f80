package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/reconcile"
)

// cli runs the command in-process and returns its exit code and stdout JSON.
func cli(t *testing.T, args ...string) (int, map[string]any) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	v := map[string]any{}
	d := json.NewDecoder(&out)
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("batchlake %s: exit %d, stdout is not JSON: %v\n%s", strings.Join(args, " "), code, err, errb.String())
	}
	return code, v
}

// htmlIDs returns the text of every element with an id.
func htmlIDs(t *testing.T, page []byte) map[string]string {
	t.Helper()
	ids, err := reconcile.PageNumbers(page)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestManualAndReportCommands: on the simulator's whole loop (three
// generations with mixed outcomes), `manual` exports exactly the records the
// run left for a person, each with a reason, and `report --html` prints and
// shows the run's own numbers; a missing --job is a usage error.
func TestManualAndReportCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lk := filepath.Join(dir, "lake")
	res := copyDemoLake(t, lk).res
	job := res["job_key"].(string)
	runManual, runSucceeded := res["manual"].(json.Number).String(), res["succeeded"].(json.Number).String()
	if runManual == "0" {
		t.Fatal("the demo run left no manual work: the test would prove nothing")
	}

	out := filepath.Join(dir, "manual.jsonl")
	code, m := cli(t, "manual", "--lake", lk, "--job", job, "--out", out)
	if code != exitOK || m["count"].(json.Number).String() != runManual || m["file"] != out {
		t.Fatalf("manual: exit %d %v, want count %s", code, m, runManual)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); n++ {
		var r struct{ RecordID, Reason, Outcome string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Reason == "" || r.Outcome == "" || r.Outcome == "succeeded" {
			t.Errorf("manual line %d: %s", n+1, sc.Text())
		}
	}
	if s := big.NewInt(int64(n)).String(); s != runManual {
		t.Errorf("manual file has %d lines, run left %s", n, runManual)
	}

	page := filepath.Join(dir, "report.html")
	code, rep := cli(t, "report", "--lake", lk, "--job", job, "--html", page)
	if code != exitOK {
		t.Fatalf("report: exit %d %v", code, rep)
	}
	if rep["succeeded"].(json.Number).String() != runSucceeded || rep["manual"].(json.Number).String() != runManual {
		t.Errorf("report succeeded %v manual %v; run said %s and %s", rep["succeeded"], rep["manual"], runSucceeded, runManual)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	ids := htmlIDs(t, b)
	for _, k := range []string{"expected", "succeeded", "retried", "manual", "pending"} {
		if ids[k] != rep[k].(json.Number).String() {
			t.Errorf("page %s = %q, JSON %v", k, ids[k], rep[k])
		}
	}
	// USD is a JSON number; the page keeps the same digits beside the
	// amount it shows rounded.
	if n, ok := rep["cost_total_usd"].(json.Number); !ok || ids["cost-total@value"] != n.String() || ids["cost-total"] != reconcile.HumanUSD(n.String()) {
		t.Errorf("page cost-total %q (%q), JSON %v", ids["cost-total"], ids["cost-total@value"], rep["cost_total_usd"])
	}
	// The simulator's batches were submitted and finished: the first
	// generation has its times and turnaround.
	for _, k := range []string{"gen-0-submitted", "gen-0-provider_done", "gen-0-reconciled_at", "gen-0-provider_turnaround", "gen-0-turnaround"} {
		if v := ids[k]; v == "" || v == "–" {
			t.Errorf("page %s = %q, want a time", k, v)
		}
	}
	if ids["tenants"] != "acme" || ids["providers"] != "sim" || ids["prompt_versions"] != "v1" {
		t.Errorf("page tenant %q provider %q prompt %q", ids["tenants"], ids["providers"], ids["prompt_versions"])
	}
	if gens := rep["generations"].([]any); len(gens) < 2 {
		t.Errorf("report has %d generations; the demo retries", len(gens))
	}

	if code, _ := cli(t, "report", "--lake", lk); code != exitUsage {
		t.Errorf("report without --job, --tenant or --all: exit %d, want %d", code, exitUsage)
	}
}
