package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

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
// mislabels a number fails. An amount shows rounded for people (HumanUSD,
// tested on its own) with its exact JSON value in <data value>.
func wantIDs(t *testing.T, s *JobSummary) map[string]string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		JobKey                               string `json:"job_key"`
		Expected, Succeeded, Retried, Manual json.Number
		Unknown, Duplicate, Quarantined      json.Number
		Pending                              json.Number `json:"pending"`
		CostTotal                            json.Number `json:"cost_total_usd"`
		Estimated                            json.Number `json:"estimated_usd"`
		NotBilled                            json.Number `json:"committed_not_billed_usd"`
		Tenants, Providers, Models           []string
		PromptVersions                       []string `json:"prompt_versions"`
		Review                               []string `json:"needs_review"`
		Generations                          []map[string]any
		Cat                                  []CostLine    `json:"cost_by_category"`
		Model                                []CostLine    `json:"cost_by_model"`
		Attempt                              []CostLine    `json:"cost_by_attempt"`
		Tenant                               []CostLine    `json:"cost_by_tenant"`
		Day                                  []CostLine    `json:"cost_by_day"`
		Attempts                             []AttemptsBin `json:"attempts_per_record"`
		Queue                                []ManualRow   `json:"manual_queue"`
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&j); err != nil {
		t.Fatal(err)
	}
	// The estimate's fields, as a reader of the JSON sees them.
	var whole map[string]any
	d = json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&whole); err != nil {
		t.Fatal(err)
	}
	ev := whole["estimate_vs_bill"].(map[string]any)
	num := func(v any) string { return v.(json.Number).String() }
	w := map[string]string{"expected": j.Expected.String(), "succeeded": j.Succeeded.String(),
		"retried": j.Retried.String(), "manual": j.Manual.String(), "pending": j.Pending.String(),
		"unknown": j.Unknown.String(), "duplicate": j.Duplicate.String(), "quarantined": j.Quarantined.String(),
		"manual-shown": fmt.Sprint(len(j.Queue)), "jobs": fmt.Sprint(len(j.Generations)),
		"tenants": strings.Join(j.Tenants, ", "), "providers": strings.Join(j.Providers, ", "),
		"models": strings.Join(j.Models, ", "), "prompt_versions": strings.Join(j.PromptVersions, ", "),
		"estimate-est-input": groupDigits(mustInt(t, ev["est_input_tokens"])), "estimate-est-output": groupDigits(mustInt(t, ev["est_output_tokens"])),
		"estimate-input": groupDigits(mustInt(t, ev["input_tokens"])), "estimate-output": groupDigits(mustInt(t, ev["output_tokens"])),
		"estimate-cached": groupDigits(mustInt(t, ev["cached_input_tokens"])),
	}
	if j.JobKey != "" {
		w["job_key"] = j.JobKey
	}
	usd := func(id string, v json.Number) {
		w[id] = HumanUSD(v.String())
		w[id+"@value"] = v.String()
	}
	usd("cost-total", j.CostTotal)
	usd("cost-estimated", j.Estimated)
	usd("cost-committed-not-billed", j.NotBilled)
	usd("estimate-billed", json.Number(num(ev["billed_usd"])))
	usd("estimate-difference", json.Number(num(ev["difference_usd"])))
	for i, r := range ev["reasons"].([]any) {
		w[fmt.Sprintf("estimate-reason-%d", i)] = strings.Join(strings.Fields(r.(string)), " ")
	}
	for i, k := range j.Review {
		w[fmt.Sprintf("review-%d", i)] = k
	}
	for i, g := range j.Generations {
		p := fmt.Sprintf("gen-%d-", i)
		w[p+"attempt"] = fmt.Sprint(g["attempt"])
		w[p+"job"] = g["job_key"].(string)[:12]
		for _, k := range []string{"tenant", "provider", "model", "prompt_version", "expected"} {
			w[p+k] = fmt.Sprint(g[k])
		}
		if g["reconciled"] == true {
			w[p+"state"] = fmt.Sprint(g["state"])
			for _, k := range []string{"succeeded", "retried", "manual", "failed", "missing", "unknown", "duplicate", "quarantined"} {
				w[p+k] = fmt.Sprint(g[k])
			}
		} else {
			w[p+"state"] = fmt.Sprint(g["state"]) + " (not reconciled)"
		}
		usd(p+"cost", g["cost_usd"].(json.Number))
		usd(p+"estimated", g["estimated_usd"].(json.Number))
	}
	for _, c := range j.Cat {
		usd("cost-category-"+c.Key, c.CostUSD)
		w["cost-category-"+c.Key+"-lines"] = fmt.Sprint(c.Lines)
	}
	for i, c := range j.Model {
		usd(fmt.Sprintf("cost-model-%d", i), c.CostUSD)
		w[fmt.Sprintf("cost-model-%d-name", i)] = c.Key
		w[fmt.Sprintf("cost-model-%d-lines", i)] = fmt.Sprint(c.Lines)
	}
	for _, c := range j.Attempt {
		usd("cost-attempt-"+c.Key, c.CostUSD)
		w["cost-attempt-"+c.Key+"-lines"] = fmt.Sprint(c.Lines)
	}
	if len(j.Tenant) > 1 {
		for i, c := range j.Tenant {
			usd(fmt.Sprintf("cost-tenant-%d", i), c.CostUSD)
			w[fmt.Sprintf("cost-tenant-%d-name", i)] = c.Key
		}
	}
	for _, c := range j.Day {
		usd("cost-day-"+c.Key, c.CostUSD)
		w["cost-day-"+c.Key+"-lines"] = fmt.Sprint(c.Lines)
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

func mustInt(t *testing.T, v any) int64 {
	t.Helper()
	n, err := v.(json.Number).Int64()
	if err != nil {
		t.Fatal(err)
	}
	return n
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
	t.Parallel()
	ctx := context.Background()
	x := newLineageLake(t)
	s := x.summarize(t, x.m1)

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
	checkPage(t, page.Bytes(), s)
}

// checkPage checks a rendered page: self-contained, every number of the
// JSON shown (Go's HTML parser), the charts laid out from the costs; then,
// where chromium exists, the same numbers in the DOM Chromium renders and a
// screenshot in which every chart's bars are painted.
func checkPage(t *testing.T, page []byte, s *JobSummary) {
	t.Helper()
	for _, bad := range []string{"http://", "https://", "<script", "<link", "src="} {
		if bytes.Contains(page, []byte(bad)) {
			t.Errorf("page contains %q: it must be self-contained", bad)
		}
	}
	want := wantIDs(t, s)
	compareIDs(t, "go html parser", pageIDs(t, page), want)
	charts := map[string][]CostLine{"chart-category": s.CostCategory, "chart-model": s.CostModel,
		"chart-attempt": s.CostAttempt, "chart-day": s.CostDay}
	if len(s.CostTenant) > 1 {
		charts["chart-tenant"] = s.CostTenant
	}
	checkCharts(t, "go html parser", page, charts)

	t.Run("chromium", func(t *testing.T) {
		if testing.Short() {
			t.Skip("-short: starting a browser takes seconds; make test renders the page in Chromium")
		}
		chromium, err := exec.LookPath("chromium")
		if err != nil {
			t.Skip("chromium not installed (apt-get install chromium): the page was checked with the Go HTML parser only")
		}
		dir := t.TempDir()
		p := filepath.Join(dir, "report.html")
		if err := os.WriteFile(p, page, 0o644); err != nil {
			t.Fatal(err)
		}
		// run runs headless Chromium once. A browser that fails to start or
		// writes nothing is retried once (seen once under load on 2 cores); a
		// page that shows other numbers is never retried.
		run := func(try int, check func(out []byte) error, args ...string) ([]byte, error) {
			cctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
				"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
				"--user-data-dir=" + filepath.Join(dir, fmt.Sprintf("profile-%d", try))}, args...)
			cmd := exec.CommandContext(cctx, chromium, append(args, "file://"+p)...)
			var out, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &stderr
			if err := cmd.Run(); err != nil {
				return nil, fmt.Errorf("chromium: %v\n%s", err, stderr.String())
			}
			if err := check(out.Bytes()); err != nil {
				return nil, fmt.Errorf("%v\n%s", err, stderr.String())
			}
			return out.Bytes(), nil
		}
		retry := func(check func([]byte) error, args ...string) []byte {
			out, err := run(1, check, args...)
			if err != nil {
				t.Logf("first chromium run failed, retrying once: %v", err)
				if out, err = run(2, check, args...); err != nil {
					t.Fatal(err)
				}
			}
			return out
		}
		dom := retry(func(out []byte) error {
			if !bytes.Contains(out, []byte(`id="succeeded"`)) {
				return fmt.Errorf("chromium dumped no report DOM:\n%s", out)
			}
			return nil
		}, "--dump-dom")
		compareIDs(t, "chromium DOM", pageIDs(t, dom), want)
		checkCharts(t, "chromium DOM", dom, charts)

		// The screenshot: each chart's largest bar is painted in its colour
		// (a chart that renders empty, or not at all, has none of it).
		shot := filepath.Join(dir, "report.png")
		retry(func([]byte) error {
			if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
				return fmt.Errorf("chromium wrote no screenshot: %v", err)
			}
			return nil
		}, "--screenshot="+shot, "--window-size=1400,6000", "--hide-scrollbars", "--force-device-scale-factor=1")
		f, err := os.Open(shot)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		img, err := png.Decode(f)
		if err != nil {
			t.Fatalf("screenshot %s: %v", shot, err)
		}
		if d := os.Getenv("BATCHLAKE_SCREENSHOT_DIR"); d != "" {
			b, _ := os.ReadFile(shot)
			_ = os.WriteFile(filepath.Join(d, strings.ReplaceAll(t.Name(), "/", "_")+".png"), b, 0o644)
		}
		// Each colour's pixels cover at least 90 % of the area the charts'
		// bars of that colour should paint (the colours are the charts'
		// alone, but for a border or two): a chart that renders empty, or
		// not at all, falls short.
		area := map[string]int{}
		for id := range charts {
			for _, b := range chartBars(t, page, id) {
				area[b.fill] += b.w * b.h
			}
		}
		for colour, a := range area {
			if a == 0 {
				continue
			}
			if n := paintedPixels(img, colour); n < a*9/10 {
				t.Errorf("screenshot: the charts' %s bars should paint %d px, the screenshot shows %d", colour, a, n)
			}
		}
		for _, h := range []string{"Needs review?", "Funnel", "Jobs", "Cost", "Estimate beside the bill", "Attempts per record", "Manual queue"} {
			if !bytes.Contains(dom, []byte("<h2>"+h+"</h2>")) {
				t.Errorf("chromium DOM: no section %q", h)
			}
		}
	})
}

type svgBar struct {
	w, h int
	fill string
}

// chartBars reads the bars (rect.bar-rect) of the svg element id from a page.
func chartBars(t *testing.T, page []byte, id string) []svgBar {
	t.Helper()
	root, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	attr := func(n *html.Node, k string) string {
		for _, a := range n.Attr {
			if a.Key == k {
				return a.Val
			}
		}
		return ""
	}
	var svg *html.Node
	var find func(*html.Node)
	find = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "svg" && attr(n, "id") == id {
			svg = n
		}
		for c := n.FirstChild; c != nil && svg == nil; c = c.NextSibling {
			find(c)
		}
	}
	find(root)
	if svg == nil {
		return nil
	}
	var bars []svgBar
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "rect" && attr(n, "class") == "bar-rect" {
			w, _ := strconv.Atoi(attr(n, "width"))
			h, _ := strconv.Atoi(attr(n, "height"))
			bars = append(bars, svgBar{w, h, attr(n, "fill")})
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(svg)
	return bars
}

// checkCharts: each chart has one bar per cost line, a bar for every cost
// above 0 and none for 0, and the largest cost's bar is the longest.
func checkCharts(t *testing.T, where string, page []byte, charts map[string][]CostLine) {
	t.Helper()
	for id, lines := range charts {
		bars := chartBars(t, page, id)
		if len(bars) != len(lines) {
			t.Errorf("%s: chart %s has %d bars, the costs %d lines", where, id, len(bars), len(lines))
			continue
		}
		top := maxCost(lines)
		for i, l := range lines {
			v, _ := new(big.Rat).SetString(string(l.CostUSD))
			size := bars[i].w
			if strings.HasSuffix(id, "-day") {
				size = bars[i].h
			}
			switch {
			case v.Sign() > 0 && size == 0:
				t.Errorf("%s: chart %s bar %q (%s USD) is empty", where, id, l.Key, l.CostUSD)
			case v.Sign() == 0 && size != 0:
				t.Errorf("%s: chart %s bar %q costs 0 but is %d px", where, id, l.Key, size)
			case top.Sign() > 0 && v.Cmp(top) == 0 && size < 100:
				t.Errorf("%s: chart %s's largest bar %q is only %d px", where, id, l.Key, size)
			}
		}
	}
}

// paintedPixels counts the pixels of img within a few levels of colour
// ("#rrggbb").
func paintedPixels(img image.Image, colour string) int {
	var want [3]int
	fmt.Sscanf(colour, "#%02x%02x%02x", &want[0], &want[1], &want[2])
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			got := [3]int{int(r >> 8), int(g >> 8), int(bl >> 8)}
			ok := true
			for i := range got {
				if d := got[i] - want[i]; d < -4 || d > 4 {
					ok = false
				}
			}
			if ok {
				n++
			}
		}
	}
	return n
}
