package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/batchlake/batchlake/lake"
	lakesql "github.com/batchlake/batchlake/sql"
)

// ManualRow is one record of the manual queue: what a person has to look at
// and why (the outcome and reason of its last attempt).
type ManualRow struct {
	RecordID    string `json:"record_id"`
	Tenant      string `json:"tenant"`
	BusinessKey string `json:"business_key"`
	Outcome     string `json:"outcome"`
	Reason      string `json:"reason"`
	Attempts    int64  `json:"attempts"`
	LastJobKey  string `json:"last_job_key"`
	// Exact decimal, a JSON number.
	CostUSD json.Number `json:"cost_usd"`
}

// ManualQueue returns the manual view's rows for a job and its retry
// descendants ("" for every job) and a tenant ("" for all), calling fn for
// each so that a large queue is streamed, not held.
func (e *Engine) ManualQueue(ctx context.Context, job, tenant string, fn func(ManualRow) error) error {
	stmts, err := lakesql.Render("manual_queue.sql", nil)
	if err != nil {
		return err
	}
	rows, err := e.DB.QueryContext(ctx, stmts[0], job, job, tenant, tenant)
	if err != nil {
		return fmt.Errorf("sql manual_queue.sql: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r ManualRow
		var cost *string
		if err := rows.Scan(&r.RecordID, &r.Tenant, &r.BusinessKey, &r.Outcome, &r.Reason, &r.Attempts, &r.LastJobKey, &cost); err != nil {
			return err
		}
		r.CostUSD = "0"
		if cost != nil {
			r.CostUSD = json.Number(trimDecimal(*cost))
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Generation is one job of a retry family in the funnel, from its latest
// reconcile report (Reconciled false when it has none yet).
type Generation struct {
	JobKey     string `json:"job_key"`
	Attempt    int64  `json:"attempt"`
	Reconciled bool   `json:"reconciled"`
	State      string `json:"state"`
	Expected   int64  `json:"expected"`
	Succeeded  int64  `json:"succeeded"`
	Retried    int64  `json:"retried"`
	Manual     int64  `json:"manual"`
	Failed     int64  `json:"failed"`
	Missing    int64  `json:"missing"`
	// Provider and Model are the job's (a fallback child's differ from its
	// parent's).
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// CostLine is the cost of one category or model.
type CostLine struct {
	Key     string      `json:"key"`
	Lines   int64       `json:"lines"`
	CostUSD json.Number `json:"cost_usd"` // exact decimal
}

// AttemptsBin is one bar of the attempts-per-record histogram.
type AttemptsBin struct {
	Attempts int64 `json:"attempts"`
	Records  int64 `json:"records"`
}

// JobSummary is everything the HTML report shows, and the JSON the report
// command prints: the page is rendered from this value alone, so a test can
// check that the page shows exactly these numbers.
type JobSummary struct {
	JobKey      string       `json:"job_key"`
	Expected    int64        `json:"expected"`
	Succeeded   int64        `json:"succeeded"`
	Retried     int64        `json:"retried"`
	Manual      int64        `json:"manual"`
	Pending     int64        `json:"pending"`
	Generations []Generation `json:"generations"`
	CostTotal   json.Number  `json:"cost_total_usd"`
	// Plan's estimates of the family's jobs, priced, and the part of them not
	// billed yet (records with no result line): an estimate, not a bill.
	EstimatedUSD          json.Number `json:"estimated_usd"`
	CommittedNotBilledUSD json.Number `json:"committed_not_billed_usd"`
	CostCategory          []CostLine  `json:"cost_by_category"`
	CostModel             []CostLine  `json:"cost_by_model"`
	// CostProviderModel is the cost by provider and model family ("openai
	// gpt-4o-mini"): what each provider of a fallback family cost.
	CostProviderModel []CostLine `json:"cost_by_provider_model"`
	// OutputContract is the family's output contract pass rate by provider
	// and model version, from each job's latest reconcile report.
	OutputContract []ContractRate `json:"output_contract,omitempty"`
	Attempts       []AttemptsBin  `json:"attempts_per_record"`
	ManualShown    []ManualRow    `json:"manual_queue"`
}

// ManualShownMax bounds the manual queue rows on the page (the manual command
// exports all of them).
const ManualShownMax = 200

// Summarize gathers the numbers of a job and its retry descendants: the
// funnel per generation from each job's latest report, the family's totals,
// cost by category and model, attempts per record, and the manual queue.
func (e *Engine) Summarize(ctx context.Context, l *lake.Lake, job lake.Digest) (*JobSummary, error) {
	s := &JobSummary{JobKey: job.Hex(), Generations: []Generation{}, CostCategory: []CostLine{}, CostModel: []CostLine{}, CostProviderModel: []CostLine{},
		Attempts: []AttemptsBin{}, ManualShown: []ManualRow{}}
	stmts, err := lakesql.Render("family_jobs.sql", nil)
	if err != nil {
		return nil, err
	}
	rows, err := e.DB.QueryContext(ctx, stmts[0], s.JobKey)
	if err != nil {
		return nil, fmt.Errorf("sql family_jobs.sql: %w", err)
	}
	for rows.Next() {
		var g Generation
		if err := rows.Scan(&g.JobKey, &g.Attempt); err != nil {
			rows.Close()
			return nil, err
		}
		s.Generations = append(s.Generations, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(s.Generations) == 0 {
		return nil, fmt.Errorf("report: no job %s in the lake: %w", s.JobKey, lake.ErrNotFound)
	}
	estimated, notBilled := NewDecimal(), NewDecimal()
	var shipped *PriceTable
	settled, err := e.SettledNotBilled(ctx)
	if err != nil {
		return nil, err
	}
	var reps []*Report
	for i := range s.Generations {
		g := &s.Generations[i]
		d, err := lake.ParseDigest(g.JobKey)
		if err != nil {
			return nil, err
		}
		if m, err := l.GetManifest(ctx, d); err != nil {
			return nil, err
		} else {
			g.Provider, g.Model = m.Provider, m.Model
		}
		rep, err := LatestReport(ctx, l, d)
		if errors.Is(err, lake.ErrNotFound) {
			// Not reconciled: all of its estimate is committed, not billed,
			// priced with the shipped table.
			m, err := l.GetManifest(ctx, d)
			if err != nil {
				return nil, err
			}
			if shipped == nil {
				if shipped, err = LoadPrices("", nil); err != nil {
					return nil, err
				}
			}
			if est := ManifestEstimate(shipped, m); est != nil {
				estimated.Add(string(est.CostUSD))
				notBilled.Add(string(est.NotBilledUSD))
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		reps = append(reps, rep)
		g.Reconciled, g.State = true, string(rep.State)
		g.Expected, g.Succeeded, g.Retried, g.Manual = rep.Expected, rep.Succeeded, rep.RetryRecords, rep.ManualRecords
		g.Failed = rep.FailedRetryable + rep.FailedPermanent + rep.QualityFailed
		g.Missing = rep.Missing
		if est := rep.Estimate; est != nil {
			if st, ok := settled[g.JobKey]; ok {
				// A later attempt answered some of the records this job
				// committed: what is left is priced with the shipped table.
				m, err := l.GetManifest(ctx, d)
				if err != nil {
					return nil, err
				}
				if shipped == nil {
					if shipped, err = LoadPrices("", nil); err != nil {
						return nil, err
					}
				}
				c := *est
				c.Settle(st, shipped, m)
				est = &c
			}
			estimated.Add(string(est.CostUSD))
			notBilled.Add(string(est.NotBilledUSD))
		}
	}
	s.EstimatedUSD, s.CommittedNotBilledUSD = json.Number(estimated.String()), json.Number(notBilled.String())
	s.OutputContract = FamilyContract(reps)

	if stmts, err = lakesql.Render("family_records.sql", nil); err != nil {
		return nil, err
	}
	if rows, err = e.DB.QueryContext(ctx, stmts[0], s.JobKey); err != nil {
		return nil, fmt.Errorf("sql family_records.sql: %w", err)
	}
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			rows.Close()
			return nil, err
		}
		switch {
		case k == "expected":
			s.Expected = n
		case k == "succeeded":
			s.Succeeded = n
		case k == "retried":
			s.Retried = n
		case k == "manual":
			s.Manual = n
		case strings.HasPrefix(k, "attempts="):
			var a int64
			fmt.Sscan(strings.TrimPrefix(k, "attempts="), &a)
			s.Attempts = append(s.Attempts, AttemptsBin{Attempts: a, Records: n})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sort.Slice(s.Attempts, func(i, j int) bool { return s.Attempts[i].Attempts < s.Attempts[j].Attempts })
	s.Pending = s.Expected - s.Succeeded - s.Manual

	total := new(big.Rat)
	for _, c := range []struct {
		dim string
		out *[]CostLine
	}{{"category", &s.CostCategory}, {"model_family", &s.CostModel}, {"provider || ' ' || model_family", &s.CostProviderModel}} {
		if stmts, err = lakesql.Render("family_costs.sql", map[string]string{"Dim": c.dim}); err != nil {
			return nil, err
		}
		if rows, err = e.DB.QueryContext(ctx, stmts[0], s.JobKey); err != nil {
			return nil, fmt.Errorf("sql family_costs.sql: %w", err)
		}
		for rows.Next() {
			var cl CostLine
			var cost string
			if err := rows.Scan(&cl.Key, &cl.Lines, &cost); err != nil {
				rows.Close()
				return nil, err
			}
			cl.CostUSD = json.Number(trimDecimal(cost))
			if c.dim == "category" {
				if x, ok := new(big.Rat).SetString(cost); ok {
					total.Add(total, x)
				}
			}
			*c.out = append(*c.out, cl)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	s.CostTotal = json.Number(trimDecimal(total.FloatString(18)))

	err = e.ManualQueue(ctx, s.JobKey, "", func(r ManualRow) error {
		if len(s.ManualShown) < ManualShownMax {
			s.ManualShown = append(s.ManualShown, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}
