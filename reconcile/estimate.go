package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/batchlake/batchlake/lake"
)

// Estimate is the report's view of plan's estimate (lake.Estimate), priced,
// beside what was billed. It is an estimate, never a bill: input tokens are
// request bytes / 4 or a per-record flag, output tokens each request's
// output limit (an upper bound) or a per-record flag.
type Estimate struct {
	InputTokens  int64       `json:"input_tokens"`
	OutputTokens int64       `json:"output_tokens"`
	CostUSD      json.Number `json:"cost_usd"`
	// PriceModel is the price-table model the estimate was priced at ("":
	// no price for the job's model; costs are 0).
	PriceModel string `json:"price_model"`
	// BilledUSD is the reconciled cost of the job's lines (cost_usd.total).
	BilledUSD json.Number `json:"billed_usd"`
	// Committed but not billed: the estimate of the records with no result
	// line yet (missing).
	NotBilledRecords      int64       `json:"not_billed_records"`
	NotBilledInputTokens  int64       `json:"not_billed_input_tokens"`
	NotBilledOutputTokens int64       `json:"not_billed_output_tokens"`
	NotBilledUSD          json.Number `json:"committed_not_billed_usd"`
}

// PriceFor returns the price row for a provider's model at a time: the
// longest matching model (pricesModel), and of it the row with the latest
// effective_from at or before t (as reconcile.sql does for lines; a Bedrock
// model id also matches without its inference-profile prefix).
func (t *PriceTable) PriceFor(provider, model string, at time.Time) *Price {
	var best *Price
	base := model
	if provider == "bedrock" {
		for _, pre := range bedrockProfilePrefixes {
			base = strings.TrimPrefix(base, pre)
		}
	}
	rows := t.priced()
	for i := range rows {
		p := &rows[i]
		if p.Provider != provider || !pricesModel(model, p.Model) && !pricesModel(base, p.Model) || (!p.EffectiveFrom.IsZero() && p.EffectiveFrom.After(at)) {
			continue
		}
		if best == nil || len(p.Model) > len(best.Model) || (len(p.Model) == len(best.Model) && p.EffectiveFrom.After(best.EffectiveFrom)) {
			best = p
		}
	}
	return best
}

// bedrockProfilePrefixes are the inference-profile prefixes of a Bedrock
// model id (reconcile.sql strips the same).
var bedrockProfilePrefixes = []string{"us.", "eu.", "apac.", "global."}

// EstimateCost prices input and output tokens exactly:
// (in × input + out × output) / 1e6 × batch_multiplier. Estimates have no
// cached tokens. nil price: 0.
func EstimateCost(p *Price, in, out int64) string {
	if p == nil {
		return "0"
	}
	v := new(big.Rat).Mul(big.NewRat(in, 1), p.Input)
	v.Add(v, new(big.Rat).Mul(big.NewRat(out, 1), p.Output))
	v.Mul(v, p.Multiply)
	v.Quo(v, million)
	return trimDecimal(v.FloatString(18))
}

// ManifestEstimate prices a manifest's estimate at its plan time, or returns
// nil when the job was planned without one.
func ManifestEstimate(t *PriceTable, m *lake.Manifest) *Estimate {
	if m.Estimate == nil {
		return nil
	}
	p := t.PriceFor(m.Provider, m.Model, m.CreatedAt)
	e := &Estimate{InputTokens: m.Estimate.InputTokens, OutputTokens: m.Estimate.OutputTokens,
		CostUSD: json.Number(EstimateCost(p, m.Estimate.InputTokens, m.Estimate.OutputTokens)), BilledUSD: "0",
		NotBilledRecords: m.ExpectedRecords, NotBilledInputTokens: m.Estimate.InputTokens, NotBilledOutputTokens: m.Estimate.OutputTokens}
	e.NotBilledUSD = e.CostUSD
	if p != nil {
		e.PriceModel = p.Model
	}
	return e
}

// estimate fills the report's estimate from the expected rows and outcomes.
func estimate(ctx context.Context, e *Engine, t *PriceTable, m *lake.Manifest, billed json.Number) (*Estimate, error) {
	if m.Estimate == nil {
		return nil, nil // planned before estimates existed
	}
	rows, err := e.QueryFile(ctx, "estimate.sql", nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	est := &Estimate{BilledUSD: billed}
	if rows.Next() {
		if err := rows.Scan(&est.InputTokens, &est.OutputTokens, &est.NotBilledRecords, &est.NotBilledInputTokens, &est.NotBilledOutputTokens); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	p := t.PriceFor(m.Provider, m.Model, m.CreatedAt)
	if p != nil {
		est.PriceModel = p.Model
	}
	est.CostUSD = json.Number(EstimateCost(p, est.InputTokens, est.OutputTokens))
	est.NotBilledUSD = json.Number(EstimateCost(p, est.NotBilledInputTokens, est.NotBilledOutputTokens))
	return est, nil
}

// Settled is the part of a job's committed-but-not-billed estimate that
// later attempts answered: records missing in the job's latest report that a
// later attempt of the same record has a result line for.
type Settled struct {
	Records, InputTokens, OutputTokens int64
}

// SettledViews are the views SettledNotBilled reads.
var SettledViews = []string{"expected", "outcomes"}

// SettledNotBilled returns, per job key, what later attempts settled of the
// job's committed-but-not-billed estimate (settled_not_billed.sql).
func (e *Engine) SettledNotBilled(ctx context.Context) (map[string]Settled, error) {
	rows, err := e.QueryFile(ctx, "settled_not_billed.sql", nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]Settled{}
	for rows.Next() {
		var k string
		var s Settled
		if err := rows.Scan(&k, &s.Records, &s.InputTokens, &s.OutputTokens); err != nil {
			return nil, fmt.Errorf("sql settled_not_billed.sql: %w", err)
		}
		out[k] = s
	}
	return out, rows.Err()
}

// Settle takes what later attempts answered out of the estimate's committed
// but not billed part. What is left is priced as the estimate was, at the
// job's plan time, by t (nothing left: exactly 0).
func (est *Estimate) Settle(s Settled, t *PriceTable, m *lake.Manifest) {
	if s.Records == 0 {
		return
	}
	est.NotBilledRecords = max(est.NotBilledRecords-s.Records, 0)
	est.NotBilledInputTokens = max(est.NotBilledInputTokens-s.InputTokens, 0)
	est.NotBilledOutputTokens = max(est.NotBilledOutputTokens-s.OutputTokens, 0)
	if est.NotBilledRecords == 0 || est.NotBilledInputTokens == 0 && est.NotBilledOutputTokens == 0 {
		est.NotBilledUSD = "0"
		return
	}
	est.NotBilledUSD = json.Number(EstimateCost(t.PriceFor(m.Provider, m.Model, m.CreatedAt), est.NotBilledInputTokens, est.NotBilledOutputTokens))
}
