package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/reconcile"
)

func costCmd(ctx context.Context, g *globals) *cobra.Command {
	var job, tenant, by, format, prices string
	var estimate, family bool
	c := &cobra.Command{
		Use:   "cost",
		Short: "Cost attribution for a job, a tenant or everything, grouped by tenant, job, model, category or attempt",
		Long: `cost sums the priced result lines of the lake (the costs view: one row per
line, priced by the price table of the reconcile that produced it) grouped by
--by. --by model groups a model's versions under its family: the price table's
model that priced the line (gpt-4o-mini-2024-07-18 under gpt-4o-mini), or for
an unpriced line the version without its trailing date or snapshot suffix
(-2024-07-18, -20241022, -0125, -v1:0); --by model_version keeps each exact
version apart. Categories: first_success, duplicate_submission, quality_failure,
retryable_failure, permanent_failure, manual (every line of a record the retry
policy gave up on — --max-attempts, --max-record-tokens, --max-record-cost-usd —
in the job where it gave up), unattributed (lines with unknown ids). They
partition the lines: the categories add up to the total exactly.

--estimate prints one row per job instead (with --job: the job and its retry
descendants): plan's token estimate priced (estimated_usd), what was billed
(billed_usd), the estimate of records with no result line yet, in this job
or a later attempt of the record (committed_not_billed_usd), and the provider's own token totals (OpenAI batch
usage, Bedrock manifest.json.out) minus the ingested lines' sums.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat("cost", format, "table", "csv", "json"); err != nil {
				return err
			}
			var scopeJob string
			if job != "" {
				d, err := jobDigest(job)
				if err != nil {
					return err
				}
				scopeJob = d.Hex()
			}
			if estimate {
				pt, err := loadPriceFlag(prices)
				if err != nil {
					return err
				}
				e, done, err := g.session(ctx, reconcile.Scope{Tenant: tenant, Job: scopeJob, Views: reconcile.SettledViews})
				if err != nil {
					return err
				}
				defer done()
				settled, err := e.SettledNotBilled(ctx)
				if err != nil {
					return err
				}
				return costEstimate(ctx, e.Lake(), settled, pt, job, tenant, g.stdout, format)
			}
			e, done, err := g.session(ctx, reconcile.Scope{Tenant: tenant, Job: scopeJob, Views: reconcile.CostViews})
			if err != nil {
				return err
			}
			defer done()
			var dims []string
			if by != "" {
				dims = strings.Split(by, ",")
			}
			// Lines priced 0 for want of a price are named on stderr: the
			// sums below leave them out silently otherwise.
			unpriced, err := e.UnpricedCosts(ctx, job, tenant)
			if err != nil {
				return err
			}
			for _, u := range unpriced {
				fmt.Fprintf(g.stderr, "batchlake cost: warning: %d %s lines of model %q have no price (counted as 0 USD); add a row for it to a --prices table and reconcile again\n",
					u.Lines, u.Provider, u.Model)
			}
			if family && job == "" {
				return &errkind.UsageError{Msg: "cost --family: pass --job, the family's first job"}
			}
			rows, err := e.CostQueryFamily(ctx, dims, job, tenant, family)
			if err != nil {
				return err
			}
			defer rows.Close()
			return writeRows(g.stdout, rows, format)
		},
	}
	c.Flags().StringVar(&job, "job", "", "only this job (key or unique prefix)")
	c.Flags().StringVar(&tenant, "tenant", "", "only this tenant")
	c.Flags().BoolVar(&family, "family", false, "with --job: the job and its retry descendants (a fallback's children on other providers too), e.g. --by provider,model")
	c.Flags().StringVar(&by, "by", "category", "comma-separated: tenant, job, model (family), model_version, category, attempt, provider, record, mode (batch or sync)")
	c.Flags().StringVar(&format, "format", "table", "table, csv or json")
	c.Flags().BoolVar(&estimate, "estimate", false, "per job: estimated, billed and committed-not-billed USD, and provider token totals minus the lines'")
	c.Flags().StringVar(&prices, "prices", "", "with --estimate: price table for jobs not reconciled yet (default: the shipped one)")
	return c
}
