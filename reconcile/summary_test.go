package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

func TestHumanUSD(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"0", "$0.00"},
		{"0.000000000000000000", "$0.00"},
		{"1", "$1.00"},
		{"1234.5678", "$1,234.57"},
		{"1234567.005", "$1,234,567.01"},
		{"999.999", "$1,000.00"},
		{"0.5", "$0.50"},
		{"0.015", "$0.015"},
		{"0.0000315", "$0.000032"},
		{"0.00000001", "$0.00000001"},
		{"0.000000001", "< $0.00000001"},
		{"-12.5", "-$12.50"},
		{"-0.0000315", "-$0.000032"},
		{"not a number", "not a number"},
	} {
		t.Run(c.in, func(t *testing.T) {
			if got := HumanUSD(c.in); got != c.want {
				t.Errorf("HumanUSD(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestHumanDuration(t *testing.T) {
	for _, c := range []struct {
		sec  int64
		want string
	}{{0, "0s"}, {59, "59s"}, {61, "1m 01s"}, {3600 + 120, "1h 02m"}, {47 * 3600, "47h 00m"}, {50 * 3600, "2d 02h"}} {
		t.Run(c.want, func(t *testing.T) {
			if got := humanDuration(&c.sec); got != c.want {
				t.Errorf("humanDuration(%d) = %q, want %q", c.sec, got, c.want)
			}
		})
	}
	if got := humanDuration(nil); got != "–" {
		t.Errorf("humanDuration(nil) = %q", got)
	}
}

// costGroup is one row of the cost command's table: its lines and cost.
type costGroup struct {
	lines int64
	cost  *big.Rat
}

// costGroups is the cost command's table for a tenant ("" for all) grouped
// by dims (`cost --by`, CostQuery), by the group's values joined with
// spaces, as exact decimals.
func costGroups(t *testing.T, e *Engine, dims []string, tenant string) map[string]costGroup {
	t.Helper()
	rows, err := e.CostQuery(context.Background(), dims, "", tenant)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]costGroup{}
	for rows.Next() {
		vals := make([]any, len(dims))
		dest := make([]any, 0, len(dims)+3)
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		var lines, records int64
		var cost any
		if err := rows.Scan(append(dest, &lines, &records, &cost)...); err != nil {
			t.Fatal(err)
		}
		x := new(big.Rat)
		switch v := cost.(type) {
		case duckdb.Decimal:
			x.SetString(FormatDecimal(v))
		case nil:
		default:
			if _, ok := x.SetString(fmt.Sprint(v)); !ok {
				t.Fatalf("cost table: cost_usd %T %v", v, v)
			}
		}
		keys := make([]string, len(vals))
		for i, v := range vals {
			keys[i] = fmt.Sprint(v)
		}
		out[strings.Join(keys, " ")] = costGroup{lines, x}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// costTable is the cost command's total for a tenant ("" for all): the sum
// of `cost --by category`'s rows.
func costTable(t *testing.T, e *Engine, tenant string) *big.Rat {
	t.Helper()
	total := new(big.Rat)
	for _, g := range costGroups(t, e, []string{"category"}, tenant) {
		total.Add(total, g.cost)
	}
	return total
}

func usdRat(t *testing.T, s fmt.Stringer) *big.Rat {
	t.Helper()
	x, ok := new(big.Rat).SetString(s.String())
	if !ok {
		t.Fatalf("not a decimal: %q", s)
	}
	return x
}

// sumLines adds a breakdown's amounts exactly.
func sumLines(t *testing.T, lines []CostLine) *big.Rat {
	t.Helper()
	sum := new(big.Rat)
	for _, l := range lines {
		sum.Add(sum, usdRat(t, l.CostUSD))
	}
	return sum
}

// TestSummaryScopes: the report of a tenant, of the whole lake, and of the
// lake since a date covers exactly the jobs it says; its total equals the
// cost table's for the same tenant to the last digit, every breakdown (by
// category, model, attempt, tenant, day, job) adds up to it; the review
// counts are the reports' (a job with an unknown id, a duplicate record and
// a quarantined line needs review); the estimate's difference is the bill
// minus the estimate, with the reasons naming the token counts.
func TestSummaryScopes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	x := newLineageLake(t) // tenant t1: a job and its retry child
	var input []string
	for i := range 3 {
		input = append(input, fmt.Sprintf(`{"custom_id":"s%d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","max_tokens":50,"messages":[{"role":"user","content":"item %d"}]}}`, i, i))
	}
	res, err := ingest.Plan(ctx, x.l, ingest.PlanOptions{Provider: "openai", Input: writeLines(t, x.dir, "input-t2.jsonl", input),
		Tenant: "t2", PromptVersion: "p9", TmpDir: x.dir})
	if err != nil {
		t.Fatal(err)
	}
	d3, _ := lake.ParseDigest(res.JobKey)
	m3, err := x.l.GetManifest(ctx, d3)
	if err != nil {
		t.Fatal(err)
	}
	// s0 answered twice (duplicate), an id the job never sent (unknown), a
	// line that is not JSON (quarantined), s1 rate-limited, s2 missing.
	rep3 := x.ingestAndReconcile(t, m3, []string{okLine("s0", "one"), okLine("s0", "two"), okLine("ghost", "who"), `{not json`},
		[]string{errLine("s1", 429, "rate_limit_exceeded")})
	if rep3.Unknown == 0 || rep3.Duplicate == 0 || rep3.Quarantined == 0 {
		t.Fatalf("the t2 job has unknown %d duplicate %d quarantined %d: the test would prove nothing", rep3.Unknown, rep3.Duplicate, rep3.Quarantined)
	}

	e := x.session(t)
	defer e.Close()
	all, t1, t2 := []string{x.m1.JobKey, x.m2.JobKey, m3.JobKey}, []string{x.m1.JobKey, x.m2.JobKey}, []string{m3.JobKey}
	past, future := x.m1.CreatedAt.Add(-time.Hour), m3.CreatedAt.Add(time.Hour)
	for _, c := range []struct {
		name        string
		scope       SummaryScope
		costTenant  string
		jobs        []string
		tenants     []string
		unknown     int64
		review      []string
		emptyReport bool
	}{
		{"tenant t1", SummaryScope{Tenant: "t1"}, "t1", t1, []string{"t1"}, 0, []string{}, false},
		{"tenant t2", SummaryScope{Tenant: "t2"}, "t2", t2, []string{"t2"}, rep3.Unknown, []string{m3.JobKey}, false},
		{"all", SummaryScope{}, "", all, []string{"t1", "t2"}, rep3.Unknown, []string{m3.JobKey}, false},
		{"all since before the first job", SummaryScope{Since: past}, "", all, []string{"t1", "t2"}, rep3.Unknown, []string{m3.JobKey}, false},
		{"all since after the last job", SummaryScope{Since: future}, "", nil, []string{}, 0, []string{}, true},
		{"job t2", SummaryScope{Job: m3.JobKey}, "t2", t2, []string{"t2"}, rep3.Unknown, []string{m3.JobKey}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := e.SummarizeScope(ctx, x.l, c.scope)
			if err != nil {
				t.Fatal(err)
			}
			var jobs []string
			for _, g := range s.Generations {
				jobs = append(jobs, g.JobKey)
			}
			slices.Sort(jobs)
			want := slices.Clone(c.jobs)
			slices.Sort(want)
			if !slices.Equal(jobs, want) {
				t.Errorf("jobs %v, want %v", jobs, want)
			}
			if !slices.Equal(s.Tenants, c.tenants) {
				t.Errorf("tenants %v, want %v", s.Tenants, c.tenants)
			}
			if s.Unknown != c.unknown || !slices.Equal(s.Review, c.review) {
				t.Errorf("unknown %d review %v, want %d %v", s.Unknown, s.Review, c.unknown, c.review)
			}
			total := usdRat(t, s.CostTotal)
			if c.emptyReport {
				if total.Sign() != 0 || s.Expected != 0 || len(s.CostDay) != 0 {
					t.Errorf("a report with no job: total %s expected %d days %v", s.CostTotal, s.Expected, s.CostDay)
				}
				return
			}
			if table := costTable(t, e, c.costTenant); total.Cmp(table) != 0 || total.Sign() == 0 {
				t.Errorf("report total %s, cost table %s", s.CostTotal, table.FloatString(18))
			}
			for name, lines := range map[string][]CostLine{"category": s.CostCategory, "model": s.CostModel, "attempt": s.CostAttempt,
				"tenant": s.CostTenant, "day": s.CostDay} {
				if sum := sumLines(t, lines); sum.Cmp(total) != 0 {
					t.Errorf("cost by %s adds up to %s, total %s", name, sum.FloatString(18), s.CostTotal)
				}
			}
			// Each breakdown is the cost command's table by the same
			// dimensions, group for group.
			for _, b := range []struct {
				dims  []string
				lines []CostLine
			}{
				{[]string{"category"}, s.CostCategory}, {[]string{"model"}, s.CostModel}, {[]string{"attempt"}, s.CostAttempt},
				{[]string{"tenant"}, s.CostTenant}, {[]string{"provider", "model"}, s.CostProviderModel},
			} {
				want := costGroups(t, e, b.dims, c.costTenant)
				if len(b.lines) != len(want) {
					t.Errorf("cost by %v: %d groups, the cost table %d", b.dims, len(b.lines), len(want))
				}
				for _, l := range b.lines {
					if w, ok := want[l.Key]; !ok || w.lines != l.Lines || w.cost.Cmp(usdRat(t, l.CostUSD)) != 0 {
						t.Errorf("cost by %v, group %q: %d lines %s, the cost table %+v", b.dims, l.Key, l.Lines, l.CostUSD, w)
					}
				}
			}
			byJob := new(big.Rat)
			for _, g := range s.Generations {
				byJob.Add(byJob, usdRat(t, g.CostUSD))
			}
			if byJob.Cmp(total) != 0 {
				t.Errorf("jobs' costs add up to %s, total %s", byJob.FloatString(18), s.CostTotal)
			}
			diff := new(big.Rat).Sub(usdRat(t, s.Estimate.BilledUSD), usdRat(t, s.Estimate.EstimatedUSD))
			if diff.Cmp(usdRat(t, s.Estimate.DifferenceUSD)) != 0 || s.Estimate.BilledUSD != s.CostTotal || s.Estimate.EstimatedUSD != s.EstimatedUSD {
				t.Errorf("estimate vs bill %+v: difference is not billed minus estimated", s.Estimate)
			}
			if len(s.Estimate.Reasons) == 0 {
				t.Error("no reason given for the estimate's difference")
			}
			var page bytes.Buffer
			if err := RenderHTML(&page, s); err != nil {
				t.Fatal(err)
			}
			ids := pageIDs(t, page.Bytes())
			compareIDs(t, "page", ids, wantIDs(t, s))
		})
	}

	t.Run("t2 numbers", func(t *testing.T) {
		s, err := e.SummarizeScope(ctx, x.l, SummaryScope{Tenant: "t2"})
		if err != nil {
			t.Fatal(err)
		}
		g := s.Generations[0]
		if g.Unknown != rep3.Unknown || g.Duplicate != rep3.Duplicate || g.Quarantined != rep3.Quarantined || !g.Review ||
			s.Duplicate != rep3.Duplicate || s.Quarantined != rep3.Quarantined {
			t.Errorf("job %+v, summary unknown %d duplicate %d quarantined %d; report %+v", g, s.Unknown, s.Duplicate, s.Quarantined, rep3.Counts)
		}
		if g.Provider != "openai" || g.Model != "gpt-4o-mini" || g.PromptVersion != "p9" || g.ReconciledAt == nil || g.TotalSeconds == nil ||
			g.CreatedAt.Sub(m3.CreatedAt).Abs() >= time.Millisecond {
			t.Errorf("job facts %+v (manifest created %s)", g, m3.CreatedAt)
		}
		// 3 answered lines (s0 twice, ghost) of 10 output tokens each,
		// against the estimate's 3 records × max_tokens 50.
		if s.Estimate.OutputTokens != 30 || s.Estimate.EstOutputTokens != 150 {
			t.Errorf("output tokens %d estimated %d, want 30 and 150", s.Estimate.OutputTokens, s.Estimate.EstOutputTokens)
		}
		if r := s.Estimate.Reasons[0]; !strings.HasPrefix(r, "Output: the answers used 30 output tokens of the 150") {
			t.Errorf("first reason %q", r)
		}
		var page bytes.Buffer
		if err := RenderHTML(&page, s); err != nil {
			t.Fatal(err)
		}
		ids := pageIDs(t, page.Bytes())
		if ids["review-0"] != m3.JobKey || !strings.Contains(ids["review"], "exits 11") {
			t.Errorf("page review %q, %q", ids["review-0"], ids["review"])
		}
	})

	t.Run("page of the whole lake", func(t *testing.T) {
		s, err := e.SummarizeScope(ctx, x.l, SummaryScope{})
		if err != nil {
			t.Fatal(err)
		}
		if len(s.CostTenant) != 2 {
			t.Fatalf("cost by tenant %v, want t1 and t2", s.CostTenant)
		}
		var page bytes.Buffer
		if err := RenderHTML(&page, s); err != nil {
			t.Fatal(err)
		}
		checkPage(t, page.Bytes(), s)
	})
}

// TestEstimateReasons: each cause of a difference between estimate and bill
// is named, with its numbers, only when the numbers show it.
func TestEstimateReasons(t *testing.T) {
	for _, c := range []struct {
		name      string
		est       EstimateVsBill
		notBilled string
		estUSD    string
		billUSD   string
		want      []string // prefixes, in order
	}{
		{"equal", EstimateVsBill{}, "0", "0", "0", []string{"The bill equals the estimate."}},
		{"short answers", EstimateVsBill{EstOutputTokens: 1000, OutputTokens: 250, EstInputTokens: 400, InputTokens: 400, Lines: 4, SuccessLines: 4}, "0", "1", "0.5",
			[]string{"Output: the answers used 250 output tokens of the 1,000 the estimate counted"}},
		{"long answers and input", EstimateVsBill{EstOutputTokens: 10, OutputTokens: 20, EstInputTokens: 1000, InputTokens: 1500, Lines: 2, SuccessLines: 2}, "0", "1", "2",
			[]string{"Output: the answers used 20 output tokens, more than the 10", "Input: the providers counted 1,500 input tokens where the estimate had 1,000"}},
		{"cache, failures, not billed, unpriced, no estimate",
			EstimateVsBill{CachedInputTokens: 5000, InputTokens: 6000, EstInputTokens: 6000, Lines: 10, SuccessLines: 7, UnpricedLines: 3, JobsWithoutEstimate: 1}, "0.25", "1", "1",
			[]string{"Cache: 5,000 input tokens", "Failures: 3 of 10 result lines", "Not billed yet: $0.25 of the estimate", "Unpriced: 3 lines", "1 job(s) have no estimate"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &JobSummary{Estimate: c.est, CommittedNotBilledUSD: json.Number(c.notBilled)}
			est, _ := new(big.Rat).SetString(c.estUSD)
			bill, _ := new(big.Rat).SetString(c.billUSD)
			got := estimateReasons(s, est, bill)
			if len(got) != len(c.want) {
				t.Fatalf("reasons %q, want %d starting %q", got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("reason %d %q, want it to start %q", i, got[i], w)
				}
			}
		})
	}
}

// TestReportCountsJobsNotReconciledYet: a job planned (and ingested) but
// not reconciled has no outcomes yet; the report still counts its records,
// expected and pending, beside a reconciled family's, each record once.
func TestReportCountsJobsNotReconciledYet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	x := newLineageLake(t) // t1: r0 to r3 expected, r0, r1 and r3 succeeded, r2 manual
	res, err := ingest.Plan(ctx, x.l, ingest.PlanOptions{Provider: "openai", Input: writeLines(t, x.dir, "input-later.jsonl",
		[]string{requestLine(0), requestLine(7), requestLine(8)}), Tenant: "t1", PromptVersion: "p3", TmpDir: x.dir})
	if err != nil {
		t.Fatal(err)
	}
	later := x.manifest(t, res.JobKey)
	p := writeLines(t, x.dir, "output-later.jsonl", []string{okLine("r7", "seven")})
	if _, err := ingest.IngestFile(ctx, x.l, later, ingest.FileOptions{Path: p, Channel: ingest.ChannelOutput, TmpDir: x.dir}); err != nil {
		t.Fatal(err)
	}
	e := x.session(t)
	defer e.Close()
	for _, c := range []struct {
		name                              string
		scope                             SummaryScope
		expected, succeeded, manual, hist int64
	}{
		{"the job not reconciled", SummaryScope{Job: later.JobKey}, 3, 0, 0, 0},
		{"the tenant", SummaryScope{Tenant: "t1"}, 7, 3, 1, 4},
		{"the reconciled family", SummaryScope{Job: x.m1.JobKey}, 4, 3, 1, 4},
	} {
		s, err := e.SummarizeScope(ctx, x.l, c.scope)
		if err != nil {
			t.Fatal(err)
		}
		var hist int64
		for _, a := range s.Attempts {
			hist += a.Records
		}
		if s.Expected != c.expected || s.Succeeded != c.succeeded || s.Manual != c.manual || s.Pending != c.expected-c.succeeded-c.manual || hist != c.hist {
			t.Errorf("%s: expected %d succeeded %d manual %d pending %d, %d records with attempts; want %d, %d, %d, %d and %d",
				c.name, s.Expected, s.Succeeded, s.Manual, s.Pending, hist, c.expected, c.succeeded, c.manual, c.expected-c.succeeded-c.manual, c.hist)
		}
	}
}
