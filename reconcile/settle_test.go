package reconcile

import (
	"encoding/json"
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
