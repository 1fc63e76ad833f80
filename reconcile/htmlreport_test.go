package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/batchlake/batchlake/lake"
)

// pageIDs returns the text of every element with an id.
func pageIDs(t *testing.T, page []byte) map[string]string {
	t.Helper()
	ids, err := PageNumbers(page)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// wantIDs is what the page must show for each id, derived from the JSON of
// the summary (not from the template), so a page that drops, swaps or
// mislabels a number fails.
func wantIDs(t *testing.T, s *JobSummary) map[string]string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		JobKey                               string `json:"job_key"`
		Expected, Succeeded, Retried, Manual json.Number
		Pending                              json.Number `json:"pending"`
		CostTotal                            json.Number `json:"cost_total_usd"`
		Estimated                            json.Number `json:"estimated_usd"`
		NotBilled                            json.Number `json:"committed_not_billed_usd"`
		Generations                          []map[string]any
		Cat                                  []CostLine    `json:"cost_by_category"`
		Model                                []CostLine    `json:"cost_by_model"`
		Attempts                             []AttemptsBin `json:"attempts_per_record"`
		Queue                                []ManualRow   `json:"manual_queue"`
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&j); err != nil {
		t.Fatal(err)
	}
	w := map[string]string{"job_key": j.JobKey, "expected": j.Expected.String(), "succeeded": j.Succeeded.String(),
		"retried": j.Retried.String(), "manual": j.Manual.String(), "pending": j.Pending.String(), "cost-total": j.CostTotal.String(),
		"manual-shown": fmt.Sprint(len(j.Queue)), "cost-estimated": j.Estimated.String(), "cost-committed-not-billed": j.NotBilled.String()}
	for i, g := range j.Generations {
		w[fmt.Sprintf("gen-%d-attempt", i)] = fmt.Sprint(g["attempt"])
		w[fmt.Sprintf("gen-%d-job", i)] = g["job_key"].(string)[:12]
		for _, k := range []string{"expected", "succeeded", "retried", "manual", "failed", "missing", "state"} {
			w[fmt.Sprintf("gen-%d-%s", i, k)] = fmt.Sprint(g[k])
		}
	}
	for _, c := range j.Cat {
		w["cost-category-"+c.Key] = c.CostUSD.String()
		w["cost-category-"+c.Key+"-lines"] = fmt.Sprint(c.Lines)
	}
	for i, c := range j.Model {
		w[fmt.Sprintf("cost-model-%d", i)] = c.CostUSD.String()
		w[fmt.Sprintf("cost-model-%d-name", i)] = c.Key
		w[fmt.Sprintf("cost-model-%d-lines", i)] = fmt.Sprint(c.Lines)
	}
	for _, a := range j.Attempts {
		w[fmt.Sprintf("attempts-%d", a.Attempts)] = fmt.Sprint(a.Records)
	}
	for i, m := range j.Queue {
		w[fmt.Sprintf("manual-%d-business_key", i)] = m.BusinessKey
		w[fmt.Sprintf("manual-%d-outcome", i)] = m.Outcome
		w[fmt.Sprintf("manual-%d-reason", i)] = m.Reason
		w[fmt.Sprintf("manual-%d-attempts", i)] = fmt.Sprint(m.Attempts)
		w[fmt.Sprintf("manual-%d-record_id", i)] = m.RecordID
	}
	return w
}

func compareIDs(t *testing.T, where string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s: no element id=%q (want %q)", where, k, v)
		} else if g != v {
			t.Errorf("%s: id=%q shows %q, JSON has %q", where, k, g, v)
		}
	}
}

// TestHTMLReport: the summary of a two-generation family has the numbers a
// reader of the scenario expects (independent of the views: from the
// reports and the scenario itself), and the page shows exactly the JSON's
// numbers — parsed in Go, and as Chromium renders it when chromium exists.
func TestHTMLReport(t *testing.T) {
	ctx := context.Background()
	x := newLineageLake(t)
	e, err := OpenSession(ctx, x.l, EngineOptions{Threads: 1, TempDir: x.dir}, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	d, _ := lake.ParseDigest(x.m1.JobKey)
	s, err := e.Summarize(ctx, x.l, d)
	if err != nil {
		t.Fatal(err)
	}

	// The scenario: r0 ok; r1 500 then ok; r2 400 (manual); r3 missing then ok.
	got := fmt.Sprintf("expected %d succeeded %d retried %d manual %d pending %d", s.Expected, s.Succeeded, s.Retried, s.Manual, s.Pending)
	if want := "expected 4 succeeded 3 retried 2 manual 1 pending 0"; got != want {
		t.Errorf("totals: %s, want %s", got, want)
	}
	var gens []string
	for _, g := range s.Generations {
		gens = append(gens, fmt.Sprintf("a%d %s e%d s%d r%d m%d", g.Attempt, g.JobKey[:8], g.Expected, g.Succeeded, g.Retried, g.Manual))
	}
	want := fmt.Sprint([]string{"a1 " + x.m1.JobKey[:8] + " e4 s1 r2 m1", "a2 " + x.m2.JobKey[:8] + " e2 s2 r0 m0"})
	if fmt.Sprint(gens) != want {
		t.Errorf("generations %v, want %s", gens, want)
	}
	if fmt.Sprint(s.Attempts) != "[{1 2} {2 2}]" {
		t.Errorf("attempts per record %v, want 2 records with 1, 2 with 2", s.Attempts)
	}
	// Cost: the sum of both jobs' report totals, and by model the same.
	total := new(big.Rat)
	for _, m := range []*lake.Manifest{x.m1, x.m2} {
		dd, _ := lake.ParseDigest(m.JobKey)
		rep, err := LatestReport(ctx, x.l, dd)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := new(big.Rat).SetString(string(rep.CostUSD["total"]))
		total.Add(total, c)
	}
	if want := json.Number(trimDecimal(total.FloatString(18))); s.CostTotal != want || want == "0" {
		t.Errorf("cost total %s, reports say %s", s.CostTotal, want)
	}
	// 3 success lines of 100 input and 10 output tokens at gpt-4o-mini batch
	// prices (0.075 and 0.30 per Mtok); the two error lines cost nothing.
	if want := json.Number("0.0000315"); s.CostTotal != want {
		t.Errorf("cost total %s, want %s", s.CostTotal, want)
	}
	byModel := map[string]json.Number{}
	for _, c := range s.CostModel {
		byModel[c.Key] = c.CostUSD
	}
	// The dated version and the error lines' undated one are one family.
	if len(byModel) != 1 || byModel["gpt-4o-mini"] != s.CostTotal {
		t.Errorf("cost by model %+v, want the total on the family gpt-4o-mini alone", s.CostModel)
	}
	if len(s.ManualShown) != 1 || s.ManualShown[0].BusinessKey != "r2" {
		t.Errorf("manual queue %+v, want r2", s.ManualShown)
	}

	var page bytes.Buffer
	if err := RenderHTML(&page, s); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"http://", "https://", "<script", "<link", "src="} {
		if bytes.Contains(page.Bytes(), []byte(bad)) {
			t.Errorf("page contains %q: it must be self-contained", bad)
		}
	}
	wantPage := wantIDs(t, s)
	compareIDs(t, "go html parser", pageIDs(t, page.Bytes()), wantPage)

	t.Run("chromium", func(t *testing.T) {
		chromium, err := exec.LookPath("chromium")
		if err != nil {
			t.Skip("chromium not installed (apt-get install chromium): the page was checked with the Go HTML parser only")
		}
		dir := t.TempDir()
		p := filepath.Join(dir, "report.html")
		if err := os.WriteFile(p, page.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		// dump runs headless Chromium once. A browser that fails to start or
		// dumps nothing is retried once (seen once under load on 2 cores); a
		// page that shows other numbers is never retried.
		dump := func(try int) ([]byte, error) {
			cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(cctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
				"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
				"--user-data-dir="+filepath.Join(dir, fmt.Sprintf("profile-%d", try)), "--dump-dom", "file://"+p)
			var out, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &stderr
			if err := cmd.Run(); err != nil {
				return nil, fmt.Errorf("chromium: %v\n%s", err, stderr.String())
			}
			if !bytes.Contains(out.Bytes(), []byte(`id="succeeded"`)) {
				return nil, fmt.Errorf("chromium dumped no report DOM:\n%s\n%s", out.String(), stderr.String())
			}
			return out.Bytes(), nil
		}
		dom, err := dump(1)
		if err != nil {
			t.Logf("first chromium run failed, retrying once: %v", err)
			if dom, err = dump(2); err != nil {
				t.Fatal(err)
			}
		}
		compareIDs(t, "chromium DOM", pageIDs(t, dom), wantPage)
	})
}
