package reconcile

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"time"

	"github.com/batchlake/batchlake/lake"
	lakesql "github.com/batchlake/batchlake/sql"
)

// SummaryScope is the set of jobs a report covers: one job and its retry
// descendants (Job), or every job of a tenant ("" for all) planned at or
// after Since (zero for any time).
type SummaryScope struct {
	Job    string    `json:"job,omitempty"`
	Tenant string    `json:"tenant,omitempty"`
	Since  time.Time `json:"since,omitzero"`
}

// Generation is one job of the report: what its manifest says, its times,
// and the counts of its latest reconcile report (Reconciled false when it
// has none yet; State is then the ledger's state of the job).
type Generation struct {
	JobKey        string `json:"job_key"`
	ParentJobKey  string `json:"parent_job_key,omitempty"`
	Attempt       int64  `json:"attempt"`
	Tenant        string `json:"tenant"`
	Provider      string `json:"provider"`
	Model         string `json:"model"`
	PromptVersion string `json:"prompt_version"`
	Reconciled    bool   `json:"reconciled"`
	State         string `json:"state"`
	// Times: planned, first submitted, the provider's last batch done (nil
	// while any is not), the latest reconcile that closed a step.
	CreatedAt    time.Time  `json:"created_at"`
	SubmittedAt  *time.Time `json:"submitted_at"`
	CompletedAt  *time.Time `json:"provider_done_at"`
	ReconciledAt *time.Time `json:"reconciled_at"`
	// Turnaround: submitted to the provider's last batch done, and planned to
	// reconciled, in seconds (nil until both ends exist).
	ProviderSeconds *int64 `json:"provider_seconds"`
	TotalSeconds    *int64 `json:"total_seconds"`
	Expected        int64  `json:"expected"`
	Succeeded       int64  `json:"succeeded"`
	Retried         int64  `json:"retried"`
	Manual          int64  `json:"manual"`
	Failed          int64  `json:"failed"`
	Missing         int64  `json:"missing"`
	// Unknown ids and duplicate records make reconcile exit 11 (review);
	// quarantined lines are malformed lines kept with their raw bytes.
	Unknown     int64       `json:"unknown"`
	Duplicate   int64       `json:"duplicate"`
	Quarantined int64       `json:"quarantined"`
	Review      bool        `json:"needs_review"`
	Lines       int64       `json:"cost_lines"`
	CostUSD     json.Number `json:"cost_usd"`
	Estimated   json.Number `json:"estimated_usd"`
}

// CostLine is the cost of one category, model, attempt, tenant or day.
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

// EstimateVsBill sets plan's estimate beside what was billed, with the
// token counts behind both, so the difference can be explained.
type EstimateVsBill struct {
	EstimatedUSD    json.Number `json:"estimated_usd"`
	BilledUSD       json.Number `json:"billed_usd"`
	DifferenceUSD   json.Number `json:"difference_usd"` // billed minus estimated
	EstInputTokens  int64       `json:"est_input_tokens"`
	EstOutputTokens int64       `json:"est_output_tokens"`
	// Jobs planned before estimates existed have none: their bill is in
	// BilledUSD but not in EstimatedUSD.
	JobsWithoutEstimate int64 `json:"jobs_without_estimate"`
	Lines               int64 `json:"lines"`
	SuccessLines        int64 `json:"success_lines"`
	InputTokens         int64 `json:"input_tokens"`
	CachedInputTokens   int64 `json:"cached_input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	UnpricedLines       int64 `json:"unpriced_lines"`
	// Reasons say, from the numbers above, why the two differ.
	Reasons []string `json:"reasons"`
}

// JobSummary is everything the HTML report shows, and the JSON the report
// command prints: the page is rendered from this value alone, so a test can
// check that the page shows exactly these numbers.
type JobSummary struct {
	Scope SummaryScope `json:"scope"`
	// JobKey is the job of a one-job report ("" for a tenant or the lake).
	JobKey         string     `json:"job_key,omitempty"`
	Tenants        []string   `json:"tenants"`
	Providers      []string   `json:"providers"`
	Models         []string   `json:"models"`
	PromptVersions []string   `json:"prompt_versions"`
	FirstCreated   *time.Time `json:"first_created_at"`
	LastReconciled *time.Time `json:"last_reconciled_at"`
	Expected       int64      `json:"expected"`
	Succeeded      int64      `json:"succeeded"`
	Retried        int64      `json:"retried"`
	Manual         int64      `json:"manual"`
	Pending        int64      `json:"pending"`
	// Sums over the jobs' latest reports; Review lists the jobs whose
	// reconcile exits 11 (unknown ids or duplicate records).
	Unknown     int64        `json:"unknown"`
	Duplicate   int64        `json:"duplicate"`
	Quarantined int64        `json:"quarantined"`
	Review      []string     `json:"needs_review"`
	Generations []Generation `json:"generations"`
	CostTotal   json.Number  `json:"cost_total_usd"`
	// Plan's estimates of the jobs, priced, and the part of them not billed
	// yet (records with no result line): an estimate, not a bill.
	EstimatedUSD          json.Number    `json:"estimated_usd"`
	CommittedNotBilledUSD json.Number    `json:"committed_not_billed_usd"`
	Estimate              EstimateVsBill `json:"estimate_vs_bill"`
	CostCategory          []CostLine     `json:"cost_by_category"`
	CostModel             []CostLine     `json:"cost_by_model"`
	CostAttempt           []CostLine     `json:"cost_by_attempt"`
	CostTenant            []CostLine     `json:"cost_by_tenant"`
	CostDay               []CostLine     `json:"cost_by_day"`
	// CostProviderModel is the cost by provider and model family ("openai
	// gpt-4o-mini"): what each provider of a fallback family cost.
	CostProviderModel []CostLine `json:"cost_by_provider_model"`
	// OutputContract is the output contract's pass rate by provider and
	// model version, from each job's latest reconcile report.
	OutputContract []ContractRate `json:"output_contract,omitempty"`
	Attempts       []AttemptsBin  `json:"attempts_per_record"`
	ManualShown    []ManualRow    `json:"manual_queue"`
}

// ManualShownMax bounds the manual queue rows on the page (the manual command
// exports all of them).
const ManualShownMax = 200

// Summarize gathers the numbers of a job and its retry descendants.
func (e *Engine) Summarize(ctx context.Context, l *lake.Lake, job lake.Digest) (*JobSummary, error) {
	return e.SummarizeScope(ctx, l, SummaryScope{Job: job.Hex()})
}

// SummarizeScope gathers the numbers of the jobs in scope: each job with
// its manifest, times and latest report's counts, the records' funnel, cost
// by category, model, attempt, tenant and day, plan's estimate beside the
// bill, attempts per record, and the first rows of the manual queue. Every
// query is a report_*.sql file over the scope of report_scope.sql.
func (e *Engine) SummarizeScope(ctx context.Context, l *lake.Lake, sc SummaryScope) (*JobSummary, error) {
	s := &JobSummary{Scope: sc, JobKey: sc.Job, Tenants: []string{}, Providers: []string{}, Models: []string{}, PromptVersions: []string{},
		Review: []string{}, Generations: []Generation{}, CostCategory: []CostLine{}, CostModel: []CostLine{}, CostAttempt: []CostLine{},
		CostTenant: []CostLine{}, CostDay: []CostLine{}, CostProviderModel: []CostLine{}, Attempts: []AttemptsBin{}, ManualShown: []ManualRow{}}
	scopeSQL, err := lakesql.Render("report_scope.sql", nil)
	if err != nil {
		return nil, err
	}
	if len(scopeSQL) != 1 {
		return nil, fmt.Errorf("sql report_scope.sql: want one CTE, have %d parts", len(scopeSQL))
	}
	since := ""
	if !sc.Since.IsZero() {
		since = sc.Since.UTC().Format("2006-01-02 15:04:05.999999") + "+00"
	}
	args := []any{sql.Named("job", sc.Job), sql.Named("tenant", sc.Tenant), sql.Named("since", since)}
	query := func(name string, data map[string]string, extra ...any) (*sql.Rows, error) {
		if data == nil {
			data = map[string]string{}
		}
		data["Scope"] = scopeSQL[0]
		stmts, err := lakesql.Render(name, data)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		rows, err := e.DB.QueryContext(ctx, stmts[0], append(append([]any{}, args...), extra...)...)
		if err != nil {
			return nil, fmt.Errorf("sql %s: %w", name, err)
		}
		logTiming(name, stmts[0], start)
		return rows, nil
	}

	if err := e.summaryJobs(ctx, l, s, query); err != nil {
		return nil, err
	}
	// A job or tenant the lake does not have is a mistake; a lake, or a
	// tenant, with no job since a date is an empty report.
	if len(s.Generations) == 0 && (sc.Job != "" || sc.Tenant != "" && sc.Since.IsZero()) {
		what := "job " + sc.Job
		if sc.Job == "" {
			what = "job of tenant " + sc.Tenant + " (batchlake jobs lists the lake's jobs)"
		}
		return nil, fmt.Errorf("report: the lake has no %s: %w", what, lake.ErrNotFound)
	}

	rows, err := query("report_records.sql", nil)
	if err != nil {
		return nil, err
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

	// The cost command's groupings, so the two tables agree line by line; one
	// query, a grouping set each and one more of its own for the day (in UTC),
	// dim a row's place in outs (report_costs.sql).
	groupings := []struct {
		dim string
		out *[]CostLine
	}{
		{costDimensions["category"], &s.CostCategory},
		{costDimensions["model"], &s.CostModel},
		{"CAST(" + costDimensions["attempt"] + " AS VARCHAR)", &s.CostAttempt},
		{costDimensions["tenant"], &s.CostTenant},
		{costDimensions["provider"] + " || ' ' || " + costDimensions["model"], &s.CostProviderModel},
	}
	dims := map[string]string{}
	var outs []*[]CostLine
	for i, g := range groupings {
		dims[fmt.Sprintf("D%d", i)] = g.dim
		outs = append(outs, g.out)
	}
	outs = append(outs, &s.CostDay)
	rows, err = query("report_costs.sql", dims)
	if err != nil {
		return nil, err
	}
	total := NewDecimal()
	for rows.Next() {
		var dim int
		var cl CostLine
		var cost string
		if err := rows.Scan(&dim, &cl.Key, &cl.Lines, &cost); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sql report_costs.sql: %w", err)
		}
		if dim < 0 || dim >= len(outs) {
			rows.Close()
			return nil, fmt.Errorf("sql report_costs.sql: a row of dimension %d", dim)
		}
		cl.CostUSD = json.Number(trimDecimal(cost))
		if dim == 0 {
			if err := total.Add(cost); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sql report_costs.sql: %w", err)
			}
		}
		*outs[dim] = append(*outs[dim], cl)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Attempts sort as numbers, not text.
	sort.SliceStable(s.CostAttempt, func(i, j int) bool {
		return len(s.CostAttempt[i].Key) < len(s.CostAttempt[j].Key) ||
			len(s.CostAttempt[i].Key) == len(s.CostAttempt[j].Key) && s.CostAttempt[i].Key < s.CostAttempt[j].Key
	})
	s.CostTotal = json.Number(total.String())

	if err := e.summaryTokens(s, query); err != nil {
		return nil, err
	}

	rows, err = query("report_manual.sql", nil, sql.Named("limit", ManualShownMax))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var r ManualRow
		var cost *string
		if err := rows.Scan(&r.RecordID, &r.Tenant, &r.BusinessKey, &r.Outcome, &r.Reason, &r.Attempts, &r.LastJobKey, &cost); err != nil {
			return nil, err
		}
		r.CostUSD = "0"
		if cost != nil {
			r.CostUSD = json.Number(trimDecimal(*cost))
		}
		s.ManualShown = append(s.ManualShown, r)
	}
	return s, rows.Err()
}

// summaryJobs fills the jobs (report_jobs.sql and each job's latest
// report), the header's lists and dates, the review counts and the
// estimates.
func (e *Engine) summaryJobs(ctx context.Context, l *lake.Lake, s *JobSummary, query func(string, map[string]string, ...any) (*sql.Rows, error)) error {
	rows, err := query("report_jobs.sql", nil)
	if err != nil {
		return err
	}
	for rows.Next() {
		var g Generation
		var submitted, completed, reconciled sql.NullTime
		var states, cost string
		if err := rows.Scan(&g.JobKey, &g.Tenant, &g.Provider, &g.Model, &g.PromptVersion, &g.Attempt, &g.ParentJobKey,
			&g.Expected, &g.CreatedAt, &submitted, &completed, &reconciled, &states, &g.Lines, &cost); err != nil {
			rows.Close()
			return fmt.Errorf("sql report_jobs.sql: %w", err)
		}
		g.CreatedAt = g.CreatedAt.UTC()
		g.SubmittedAt, g.CompletedAt, g.ReconciledAt = utcPtr(submitted), utcPtr(completed), utcPtr(reconciled)
		g.ProviderSeconds, g.TotalSeconds = seconds(g.SubmittedAt, g.CompletedAt), seconds(&g.CreatedAt, g.ReconciledAt)
		if states != "" {
			var ss []lake.State
			for _, st := range strings.Split(states, ",") {
				ss = append(ss, lake.State(st))
			}
			g.State = string(lake.JobState(ss))
		}
		g.CostUSD = json.Number(trimDecimal(cost))
		s.Generations = append(s.Generations, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}

	estimated, notBilled := NewDecimal(), NewDecimal()
	var shipped *PriceTable
	var reps []*Report
	settled, err := e.SettledNotBilled(ctx)
	if err != nil {
		return err
	}
	seen := map[*[]string]map[string]bool{}
	add := func(list *[]string, v string) {
		if seen[list] == nil {
			seen[list] = map[string]bool{}
		}
		if !seen[list][v] {
			seen[list][v] = true
			*list = append(*list, v)
		}
	}
	for i := range s.Generations {
		g := &s.Generations[i]
		add(&s.Tenants, g.Tenant)
		add(&s.Providers, g.Provider)
		add(&s.Models, g.Model)
		add(&s.PromptVersions, g.PromptVersion)
		if s.FirstCreated == nil || g.CreatedAt.Before(*s.FirstCreated) {
			s.FirstCreated = &g.CreatedAt
		}
		if g.ReconciledAt != nil && (s.LastReconciled == nil || g.ReconciledAt.After(*s.LastReconciled)) {
			s.LastReconciled = g.ReconciledAt
		}
		d, err := lake.ParseDigest(g.JobKey)
		if err != nil {
			return err
		}
		pricing := func() (*PriceTable, *lake.Manifest, error) {
			m, err := l.GetManifest(ctx, d)
			if err != nil {
				return nil, nil, err
			}
			if shipped == nil {
				if shipped, err = LoadPrices("", nil); err != nil {
					return nil, nil, err
				}
			}
			return shipped, m, nil
		}
		var est *Estimate
		rep, err := LatestReport(ctx, l, d)
		switch {
		case errors.Is(err, lake.ErrNotFound):
			// Not reconciled: all of its estimate is committed, not
			// billed, priced with the shipped table.
			pt, m, err := pricing()
			if err != nil {
				return err
			}
			est = ManifestEstimate(pt, m)
		case err != nil:
			return err
		default:
			reps = append(reps, rep)
			g.Reconciled, g.State = true, string(rep.State)
			g.Expected, g.Succeeded, g.Retried, g.Manual = rep.Expected, rep.Succeeded, rep.RetryRecords, rep.ManualRecords
			g.Failed = rep.FailedRetryable + rep.FailedPermanent + rep.QualityFailed
			g.Missing, g.Unknown, g.Duplicate, g.Quarantined = rep.Missing, rep.Unknown, rep.Duplicate, rep.Quarantined
			g.Review = rep.Unknown > 0 || rep.Duplicate > 0
			if est = rep.Estimate; est != nil {
				if st, ok := settled[g.JobKey]; ok {
					// A later attempt answered some of the records this
					// job committed: what is left is priced with the
					// shipped table.
					pt, m, err := pricing()
					if err != nil {
						return err
					}
					c := *est
					c.Settle(st, pt, m)
					est = &c
				}
			}
		}
		g.Estimated = "0"
		if est == nil {
			s.Estimate.JobsWithoutEstimate++
		} else {
			g.Estimated = est.CostUSD
			s.Estimate.EstInputTokens += est.InputTokens
			s.Estimate.EstOutputTokens += est.OutputTokens
			if err := estimated.Add(string(est.CostUSD)); err != nil {
				return fmt.Errorf("job %s estimate: %w", g.JobKey, err)
			}
			if err := notBilled.Add(string(est.NotBilledUSD)); err != nil {
				return fmt.Errorf("job %s estimate: %w", g.JobKey, err)
			}
		}
		s.Unknown += g.Unknown
		s.Duplicate += g.Duplicate
		s.Quarantined += g.Quarantined
		if g.Review {
			s.Review = append(s.Review, g.JobKey)
		}
	}
	s.EstimatedUSD, s.CommittedNotBilledUSD = json.Number(estimated.String()), json.Number(notBilled.String())
	s.OutputContract = FamilyContract(reps)
	return nil
}

// summaryTokens fills the estimate's other side: the lines' tokens, and
// the reasons the bill differs from the estimate.
func (e *Engine) summaryTokens(s *JobSummary, query func(string, map[string]string, ...any) (*sql.Rows, error)) error {
	rows, err := query("report_tokens.sql", nil)
	if err != nil {
		return err
	}
	defer rows.Close()
	v := &s.Estimate
	if rows.Next() {
		if err := rows.Scan(&v.Lines, &v.SuccessLines, &v.InputTokens, &v.CachedInputTokens, &v.OutputTokens, &v.UnpricedLines); err != nil {
			return fmt.Errorf("sql report_tokens.sql: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	v.EstimatedUSD, v.BilledUSD = s.EstimatedUSD, s.CostTotal
	est, _ := new(big.Rat).SetString(string(s.EstimatedUSD))
	bill, _ := new(big.Rat).SetString(string(s.CostTotal))
	if est == nil || bill == nil {
		return fmt.Errorf("report: estimate %q or bill %q is not a decimal", s.EstimatedUSD, s.CostTotal)
	}
	v.DifferenceUSD = json.Number(trimDecimal(new(big.Rat).Sub(bill, est).FloatString(18)))
	v.Reasons = estimateReasons(s, est, bill)
	return nil
}

// estimateReasons says, from the numbers only, why the bill differs from
// plan's estimate; the first reason is the largest in tokens.
func estimateReasons(s *JobSummary, est, bill *big.Rat) []string {
	v := &s.Estimate
	var out []string
	if v.EstOutputTokens > 0 || v.OutputTokens > 0 {
		switch {
		case v.OutputTokens < v.EstOutputTokens:
			out = append(out, fmt.Sprintf("Output: the answers used %s output tokens of the %s the estimate counted (each request's output limit, an upper bound, or the --est-output-tokens flag), %s.",
				groupDigits(v.OutputTokens), groupDigits(v.EstOutputTokens), percentOf(v.OutputTokens, v.EstOutputTokens)))
		case v.OutputTokens > v.EstOutputTokens:
			out = append(out, fmt.Sprintf("Output: the answers used %s output tokens, more than the %s the estimate counted (requests with no output limit are estimated at --est-output-tokens; reasoning tokens are billed as output).",
				groupDigits(v.OutputTokens), groupDigits(v.EstOutputTokens)))
		}
	}
	if v.EstInputTokens > 0 || v.InputTokens > 0 {
		if v.InputTokens != v.EstInputTokens {
			out = append(out, fmt.Sprintf("Input: the providers counted %s input tokens where the estimate had %s (request bytes / 4, or --est-input-tokens), %s.",
				groupDigits(v.InputTokens), groupDigits(v.EstInputTokens), percentOf(v.InputTokens, v.EstInputTokens)))
		}
	}
	if v.CachedInputTokens > 0 {
		out = append(out, fmt.Sprintf("Cache: %s input tokens were read from the prompt cache at the cached price; the estimate prices every input token at the full price.",
			groupDigits(v.CachedInputTokens)))
	}
	if failed := v.Lines - v.SuccessLines; failed > 0 {
		out = append(out, fmt.Sprintf("Failures: %s of %s result lines were failures; the estimate counted their records in full, the bill has only the tokens the provider reported for them (usually none), and a retry is estimated again in its own job.",
			groupDigits(failed), groupDigits(v.Lines)))
	}
	if nb, ok := new(big.Rat).SetString(string(s.CommittedNotBilledUSD)); ok && nb.Sign() > 0 {
		out = append(out, fmt.Sprintf("Not billed yet: %s of the estimate is for records with no result line yet (committed, not billed).", HumanUSD(string(s.CommittedNotBilledUSD))))
	}
	if v.UnpricedLines > 0 {
		out = append(out, fmt.Sprintf("Unpriced: %s lines had no row in the price table and count 0 USD in the bill (add the model to a --prices table and reconcile again).",
			groupDigits(v.UnpricedLines)))
	}
	if v.JobsWithoutEstimate > 0 {
		out = append(out, fmt.Sprintf("%d job(s) have no estimate (planned before estimates existed, or not priced): their bill counts, their estimate does not.", v.JobsWithoutEstimate))
	}
	if len(out) == 0 && est.Cmp(bill) == 0 {
		out = append(out, "The bill equals the estimate.")
	}
	return out
}

func percentOf(a, b int64) string {
	if b == 0 {
		return "no estimate to compare"
	}
	return fmt.Sprintf("%.0f%% of it", float64(a)*100/float64(b))
}

func utcPtr(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	u := t.Time.UTC()
	return &u
}

func seconds(from, to *time.Time) *int64 {
	if from == nil || to == nil {
		return nil
	}
	n := int64(to.Sub(*from).Round(time.Second) / time.Second)
	return &n
}
