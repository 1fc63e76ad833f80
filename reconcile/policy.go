package reconcile

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"time"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

// Caps are the per-record cumulative limits of the retry policy: a record
// whose tokens or cost over every attempt so far (this job and its ancestors)
// reach a cap goes to the manual queue instead of another attempt.
type Caps struct {
	// Tokens caps input_tokens + output_tokens summed over the record's
	// attempts (0: no cap).
	Tokens int64
	// CostUSD caps the record's summed cost, an exact decimal with at most 18
	// places ("": no cap).
	CostUSD string
}

// Set reports whether any cap is set.
func (c Caps) Set() bool { return c.Tokens > 0 || c.CostUSD != "" }

// ParseCostCap checks a --max-record-cost-usd value: a positive decimal with
// at most 18 places, returned in canonical form.
func ParseCostCap(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || r.Sign() <= 0 {
		return "", &errkind.UsageError{Msg: fmt.Sprintf("--max-record-cost-usd %q: want a positive decimal, e.g. 0.25", s)}
	}
	scaled := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(18), nil)))
	if !scaled.IsInt() {
		return "", &errkind.UsageError{Msg: fmt.Sprintf("--max-record-cost-usd %q: at most 18 decimal places", s)}
	}
	return trimDecimal(r.FloatString(18)), nil
}

// policyData fills policy.sql. The values are validated numbers, never user text.
func (c Caps) policyData() map[string]any {
	tok, cost := "false", "false"
	if c.Tokens > 0 {
		tok = "u.tokens >= " + strconv.FormatInt(c.Tokens, 10)
	}
	if c.CostUSD != "" {
		cost = "u.cost_usd >= CAST(" + quote(c.CostUSD) + " AS DECIMAL(38, 18))"
	}
	return map[string]any{"Caps": c.Set(), "TokenCap": tok, "CostCap": cost}
}

// priorLines are the committed files that hold a job's ancestors' priced lines.
type priorLines struct {
	Reports  []string // the latest report of each ancestor: part of the run's identity
	Costs    []string
	Attempts []string
}

// ancestors gathers, for every ancestor of m (parent_job_key, recursively),
// its latest report's costs file and its attempts files. An ancestor never
// reconciled contributes nothing: its lines were never priced.
func ancestors(ctx context.Context, l *lake.Lake, m *lake.Manifest) (*priorLines, error) {
	p := &priorLines{}
	seen := map[string]bool{m.JobKey: true}
	for parent := m.ParentJobKey; parent != "" && !seen[parent]; {
		seen[parent] = true
		d, err := lake.ParseDigest(parent)
		if err != nil {
			return nil, fmt.Errorf("caps: parent job key %q: %w", parent, err)
		}
		pm, err := l.GetManifest(ctx, d)
		if err != nil {
			return nil, fmt.Errorf("caps: ancestor %s: %w", parent[:12], err)
		}
		rep, err := LatestReport(ctx, l, d)
		switch {
		case errors.Is(err, lake.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			p.Reports = append(p.Reports, rep.Report)
			if rep.CostsFile != "" {
				p.Costs = append(p.Costs, rep.CostsFile)
			}
			recs, _, err := countedIngests(ctx, l, d)
			if err != nil {
				return nil, err
			}
			for _, r := range recs {
				p.Attempts = append(p.Attempts, r.AttemptKeys()...)
			}
		}
		parent = pm.ParentJobKey
	}
	return p, nil
}

// load makes the ancestors' lines visible to policy.sql.
func (p *priorLines) load(ctx context.Context, e *Engine) error {
	costs, err := LocalFiles[lake.CostRow](ctx, e, p.Costs)
	if err != nil {
		return err
	}
	attempts, err := LocalFiles[lake.AttemptRow](ctx, e, p.Attempts)
	if err != nil {
		return err
	}
	return e.ExecFile(ctx, "policy_sources.sql", map[string]string{"Costs": sqlList(costs), "Attempts": sqlList(attempts)})
}

// settle fixes each record's disposition and each line's cost category:
// policy.sql (the caps send records to the manual queue), then
// line_costs.sql (the manual category depends on those dispositions).
func settle(ctx context.Context, e *Engine, c Caps) error {
	if c.Set() {
		if err := e.ExecFile(ctx, "policy.sql", c.policyData()); err != nil {
			return err
		}
	}
	return costLines(ctx, e)
}

// cappedRecords counts the records a cap sent to the manual queue (after
// settle, or in a merge over partitions that applied it).
func cappedRecords(ctx context.Context, e *Engine, c Caps) (int64, error) {
	if !c.Set() {
		return 0, nil
	}
	return e.count(ctx, "policy_count.sql", nil)
}

// notBefore is the earliest time a job's retry child may be submitted: the
// reconcile's time plus the window, rounded to the second.
func notBefore(at time.Time, window time.Duration) *time.Time {
	if window <= 0 {
		return nil
	}
	t := at.Add(window).UTC().Truncate(time.Second)
	return &t
}
