package reconcile

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/batchlake/batchlake/lake"
)

// TestEstimateSettle: a job's committed-but-not-billed estimate loses the
// records later attempts answered; what is left is priced at the job's plan
// time, and nothing left is exactly 0.
func TestEstimateSettle(t *testing.T) {
	pt, err := LoadPrices("", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := &lake.Manifest{Provider: "openai", Model: "gpt-4o-mini", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	p := pt.PriceFor(m.Provider, m.Model, m.CreatedAt)
	if p == nil {
		t.Fatal("no shipped price for gpt-4o-mini")
	}
	base := Estimate{NotBilledRecords: 3, NotBilledInputTokens: 300, NotBilledOutputTokens: 60,
		NotBilledUSD: json.Number(EstimateCost(p, 300, 60))}
	for _, c := range []struct {
		name    string
		s       Settled
		records int64
		usd     string
	}{
		{"nothing settled", Settled{}, 3, EstimateCost(p, 300, 60)},
		{"one of three", Settled{Records: 1, InputTokens: 100, OutputTokens: 20}, 2, EstimateCost(p, 200, 40)},
		{"all", Settled{Records: 3, InputTokens: 300, OutputTokens: 60}, 0, "0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			est := base
			est.Settle(c.s, pt, m)
			if est.NotBilledRecords != c.records || string(est.NotBilledUSD) != c.usd {
				t.Errorf("after settling %+v: %d records, %s USD; want %d, %s", c.s, est.NotBilledRecords, est.NotBilledUSD, c.records, c.usd)
			}
		})
	}
	if EstimateCost(p, 200, 40) == EstimateCost(p, 300, 60) {
		t.Fatal("the prices make the cases indistinguishable")
	}
}

// TestSettledNotBilledNeedsALaterAnswer: a job's missing records that no
// later attempt answered stay committed but not billed: with no retry yet,
// nothing of a job with missing records is settled.
func TestSettledNotBilledNeedsALaterAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, dir := testLake(t)
	g := generate(rand.New(rand.NewPCG(11, 11)), 300, 2, 2)
	if g.truth.counts["missing"] == 0 {
		t.Fatal("the generated job has no missing record: the test would prove nothing")
	}
	m := planAndIngest(t, l, dir, g, 100)
	if _, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}}); err != nil {
		t.Fatal(err)
	}
	e, err := OpenSession(ctx, l, EngineOptions{Threads: 1, TempDir: dir}, Scope{Views: SettledViews})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := e.SettledNotBilled(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 0 {
		t.Errorf("settled with no later attempt: %+v (the job has %d missing records)", s, g.truth.counts["missing"])
	}
}
