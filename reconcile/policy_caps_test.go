package reconcile

import (
	"context"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// capLake is a one-record job whose attempt 1 fails the quality gate (an
// empty 200 with 1000 input and 100 output tokens), retried once, and whose
// attempt 2 fails the same way with 600 + 50 tokens.
type capLake struct {
	l        *lake.Lake
	dir      string
	m1, m2   *lake.Manifest
	c1, c2   *big.Rat // each attempt's cost at the shipped gpt-4o-mini price
	tok1, t2 int64
}

func emptyLine(id string, in, out int64) string {
	return fmt.Sprintf(`{"id":"br","custom_id":%q,"response":{"status_code":200,"body":{"object":"chat.completion","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}},"error":null}`, id, in, out)
}

func newCapLake(t *testing.T, notBefore time.Duration, clock func() time.Time) *capLake {
	t.Helper()
	ctx := context.Background()
	l, dir := testLake(t)
	x := &capLake{l: l, dir: dir, tok1: 1100, t2: 650}
	x.c1 = new(big.Rat).Add(new(big.Rat).Mul(big.NewRat(1000, 1), pIn), new(big.Rat).Mul(big.NewRat(100, 1), pOut))
	x.c2 = new(big.Rat).Add(new(big.Rat).Mul(big.NewRat(600, 1), pIn), new(big.Rat).Mul(big.NewRat(50, 1), pOut))
	in := `{"custom_id":"r0","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}],"max_tokens":32}}`
	res, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: "openai", Input: writeLines(t, dir, "in.jsonl", []string{in}), Tenant: "t1", PromptVersion: "p1", TmpDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := lake.ParseDigest(res.JobKey)
	x.m1, _ = l.GetManifest(ctx, d1)
	if _, err := ingest.IngestFile(ctx, l, x.m1, ingest.FileOptions{Path: writeLines(t, dir, "o1.jsonl", []string{emptyLine("r0", 1000, 100)}), Channel: ingest.ChannelOutput, TmpDir: dir}); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(ctx, l, Options{JobKey: x.m1.JobKey, TmpDir: dir, RetryNotBefore: notBefore, Now: clock, Engine: EngineOptions{Threads: 1}})
	if err != nil || rep.RetryRecords != 1 {
		t.Fatalf("job 1: %v %+v", err, rep)
	}
	rr, err := Retry(ctx, l, d1, dir)
	if err != nil || rr.Child == nil {
		t.Fatalf("retry: %v %+v", err, rr)
	}
	d2, _ := lake.ParseDigest(rr.Child.JobKey)
	x.m2, _ = l.GetManifest(ctx, d2)
	if _, err := ingest.IngestFile(ctx, l, x.m2, ingest.FileOptions{Path: writeLines(t, dir, "o2.jsonl", []string{emptyLine(ingest.RetryCustomID(2, expectedRecord(t, x)), 600, 50)}), Channel: ingest.ChannelOutput, TmpDir: dir}); err != nil {
		t.Fatal(err)
	}
	return x
}

func expectedRecord(t *testing.T, x *capLake) string {
	var id string
	(&lineageLake{l: x.l, dir: x.dir}).query(t, "SELECT record_id FROM expected WHERE job_key = '"+x.m1.JobKey+"'", func(v []any) { id = v[0].(string) })
	return id
}

// TestCapsAtTheBoundary: attempt 2 alone is under every cap below, so only
// the sum over both generations can reach one. A cap equal to the sum (to
// the last of 18 decimals) sends the record to the manual queue with its
// reason and its attempt's cost to the manual category; one unit above
// keeps it in the retry set.
func TestCapsAtTheBoundary(t *testing.T) {
	t.Parallel()
	x := newCapLake(t, 0, nil)
	sum := new(big.Rat).Add(x.c1, x.c2)
	tiny := big.NewRat(1, 1_000_000_000_000_000_000)
	cases := []struct {
		name   string
		caps   Caps
		reason string // "" : retried
	}{
		{"no caps", Caps{}, ""},
		{"tokens reached exactly", Caps{Tokens: x.tok1 + x.t2}, "token_cap"},
		{"tokens one short of the cap", Caps{Tokens: x.tok1 + x.t2 + 1}, ""},
		{"cost reached exactly", Caps{CostUSD: trimDecimal(sum.FloatString(18))}, "cost_cap"},
		{"cost 1e-18 short of the cap", Caps{CostUSD: trimDecimal(new(big.Rat).Add(sum, tiny).FloatString(18))}, ""},
		{"both: tokens named", Caps{Tokens: 10, CostUSD: "0.000000000000000001"}, "token_cap"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, err := Run(context.Background(), x.l, Options{JobKey: x.m2.JobKey, TmpDir: x.dir, Caps: c.caps, Engine: EngineOptions{Threads: 1}})
			if err != nil {
				t.Fatal(err)
			}
			manual := rat(string(rep.CostUSD["manual"]))
			quality := rat(string(rep.CostUSD["quality_failure"]))
			if c.reason == "" {
				if rep.RetryRecords != 1 || rep.ManualRecords != 0 || rep.CappedRecords != 0 || manual.Sign() != 0 || quality.Cmp(x.c2) != 0 {
					t.Errorf("want the record retried, its cost quality_failure %s: %+v", x.c2.FloatString(18), rep)
				}
				return
			}
			if rep.RetryRecords != 0 || rep.ManualRecords != 1 || rep.CappedRecords != 1 || manual.Cmp(x.c2) != 0 || quality.Sign() != 0 {
				t.Errorf("want the record in manual (%s), its cost %s in manual: %+v", c.reason, x.c2.FloatString(18), rep)
			}
			var reason string
			(&lineageLake{l: x.l, dir: x.dir}).query(t, "SELECT reason FROM outcomes WHERE job_key = '"+x.m2.JobKey+"'", func(v []any) { reason = v[0].(string) })
			if reason != c.reason {
				t.Errorf("reason %q, want %q", reason, c.reason)
			}
		})
	}
}

func TestParseCostCap(t *testing.T) {
	for in, want := range map[string]string{"0.25": "0.25", "1": "1", "0.000000000000000001": "0.000000000000000001", "": ""} {
		if got, err := ParseCostCap(in); err != nil || got != want {
			t.Errorf("ParseCostCap(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"-1", "0", "abc", "0.0000000000000000001", "1e400x"} {
		if _, err := ParseCostCap(bad); err == nil {
			t.Errorf("ParseCostCap(%q): want an error", bad)
		}
	}
}

// TestRetryNotBeforeIsDataNotIdentity: --retry-not-before puts the earliest
// submit time in the report and the child's manifest, and the child's job key
// is the one planned without a window (the window is not identity).
func TestRetryNotBeforeIsDataNotIdentity(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	with := newCapLake(t, 30*time.Minute, clock)
	without := newCapLake(t, 0, clock)
	want := now.Add(30 * time.Minute)
	if with.m2.NotBefore == nil || !with.m2.NotBefore.Equal(want) {
		t.Errorf("child not_before %v, want %v", with.m2.NotBefore, want)
	}
	if without.m2.NotBefore != nil {
		t.Errorf("child without a window has not_before %v", without.m2.NotBefore)
	}
	if with.m2.JobKey != without.m2.JobKey {
		t.Errorf("the window changed the child's job key: %s vs %s", with.m2.JobKey, without.m2.JobKey)
	}
	rep, err := LatestReport(context.Background(), with.l, mustDigest(with.m1.JobKey))
	if err != nil || rep.RetryNotBefore == nil || !rep.RetryNotBefore.Equal(want) {
		t.Errorf("report retry_not_before %v (%v), want %v", rep.RetryNotBefore, err, want)
	}
	// Retry again: the child exists, nothing changes, its time stays.
	rr, err := RetryWith(context.Background(), with.l, mustDigest(with.m1.JobKey), RetryOptions{TmpDir: with.dir, NotBefore: 2 * time.Hour, Now: clock})
	if err != nil || rr.Child.Created || rr.NotBefore == nil || !rr.NotBefore.Equal(want) {
		t.Errorf("retry again: %v %+v", err, rr)
	}
}

func mustDigest(s string) lake.Digest { d, _ := lake.ParseDigest(s); return d }
