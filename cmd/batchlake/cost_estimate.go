package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/reconcile"
)

// estimateColumns are the columns of `cost --estimate`; numeric ones are
// JSON numbers in --format json.
var estimateColumns = []struct {
	name    string
	numeric bool
}{
	{"job_key", false}, {"tenant", false}, {"attempt", true}, {"records", true}, {"reconciled", false},
	{"est_input_tokens", true}, {"est_output_tokens", true}, {"estimated_usd", true}, {"billed_usd", true},
	{"committed_not_billed_usd", true}, {"provider_totals", true}, {"provider_input_diff", true},
	{"provider_cached_diff", true}, {"provider_output_diff", true},
}

// costEstimate prints, per job (one job and its retry descendants, a
// tenant's jobs, or every job), plan's estimate beside what was billed, what
// is committed but not billed yet, and how far the provider's own token
// totals are from the ingested lines (provider minus lines, summed over the
// job's batches). A job not reconciled yet has billed 0 and its whole
// estimate committed; a record a later attempt answered (settled) is no
// longer committed in the job that missed it.
func costEstimate(ctx context.Context, l *lake.Lake, settled map[string]reconcile.Settled, pt *reconcile.PriceTable, job, tenant string, w io.Writer, format string) error {
	keys, err := l.List(ctx, lake.ManifestPrefix)
	if err != nil {
		return err
	}
	var ms []*lake.Manifest
	children := map[string][]string{}
	byKey := map[string]*lake.Manifest{}
	for _, k := range keys {
		d, err := lake.ParseDigest(strings.TrimSuffix(strings.TrimPrefix(k, lake.ManifestPrefix), ".json"))
		if err != nil {
			continue
		}
		m, err := l.GetManifest(ctx, d)
		if err != nil {
			return err
		}
		if tenant != "" && m.Tenant != tenant {
			continue
		}
		byKey[m.JobKey] = m
		children[m.ParentJobKey] = append(children[m.ParentJobKey], m.JobKey)
		ms = append(ms, m)
	}
	if job != "" {
		// The job and its retry descendants, oldest generation first.
		ms = nil
		for queue := []string{job}; len(queue) > 0; queue = queue[1:] {
			if m := byKey[queue[0]]; m != nil {
				ms = append(ms, m)
				queue = append(queue, children[m.JobKey]...)
			}
		}
	}
	var rows [][]string
	total := map[string]*reconcile.Decimal{"estimated_usd": reconcile.NewDecimal(), "billed_usd": reconcile.NewDecimal(), "committed_not_billed_usd": reconcile.NewDecimal()}
	for _, m := range ms {
		est := reconcile.ManifestEstimate(pt, m)
		reconciled := "no"
		var diffs [3]int64
		var nTotals int
		rep, err := reconcile.LatestReport(ctx, l, mustJob(m.JobKey))
		switch {
		case errors.Is(err, lake.ErrNotFound):
		case err != nil:
			return err
		default:
			reconciled = "yes"
			if rep.Estimate != nil {
				est = rep.Estimate
				// Records a later attempt answered are billed there.
				est.Settle(settled[m.JobKey], pt, m)
			} else if est != nil {
				est.BilledUSD = rep.CostUSD["total"]
			}
			for _, t := range rep.ProviderTotals {
				nTotals++
				diffs[0] += t.Difference.InputTokens
				if t.Difference.CachedInputTokens != nil {
					diffs[1] += *t.Difference.CachedInputTokens
				}
				diffs[2] += t.Difference.OutputTokens
			}
		}
		if est == nil {
			est = &reconcile.Estimate{CostUSD: "0", BilledUSD: "0", NotBilledUSD: "0"}
			if rep != nil {
				est.BilledUSD = rep.CostUSD["total"]
			}
		}
		for k, v := range map[string]json.Number{"estimated_usd": est.CostUSD, "billed_usd": est.BilledUSD, "committed_not_billed_usd": est.NotBilledUSD} {
			if err := total[k].Add(string(v)); err != nil {
				return err
			}
		}
		i := func(n int64) string { return strconv.FormatInt(n, 10) }
		rows = append(rows, []string{m.JobKey, m.Tenant, strconv.Itoa(m.Attempt), i(m.ExpectedRecords), reconciled,
			i(est.InputTokens), i(est.OutputTokens), string(est.CostUSD), string(est.BilledUSD), string(est.NotBilledUSD),
			strconv.Itoa(nTotals), i(diffs[0]), i(diffs[1]), i(diffs[2])})
	}
	if len(rows) > 1 {
		rows = append(rows, []string{"total", "", "", "", "", "", "", total["estimated_usd"].String(), total["billed_usd"].String(),
			total["committed_not_billed_usd"].String(), "", "", "", ""})
	}
	return writeStringRows(w, rows, format)
}

// writeStringRows writes the estimate rows as a table, CSV or JSON.
func writeStringRows(w io.Writer, rows [][]string, format string) error {
	cols := make([]string, len(estimateColumns))
	for i, c := range estimateColumns {
		cols[i] = c.name
	}
	switch format {
	case "table":
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
		for _, r := range rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		return tw.Flush()
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write(cols)
		cw.WriteAll(rows)
		return cw.Error()
	case "json":
		out := []map[string]any{}
		for _, r := range rows {
			o := map[string]any{}
			for i, c := range estimateColumns {
				switch {
				case r[i] == "":
					o[c.name] = nil
				case c.numeric:
					o[c.name] = json.Number(r[i])
				default:
					o[c.name] = r[i]
				}
			}
			out = append(out, o)
		}
		printJSON(w, out)
		return nil
	}
	return &errkind.UsageError{Msg: "--format: want table, csv or json"}
}
