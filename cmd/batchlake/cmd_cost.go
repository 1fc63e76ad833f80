package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"
)

func costCmd(ctx context.Context, g *globals) *cobra.Command {
	var job, tenant, by, format string
	c := &cobra.Command{
		Use:   "cost",
		Short: "Cost attribution for a job, a tenant or everything, grouped by tenant, job, model, category or attempt",
		Long: `cost sums the priced result lines of the lake (the costs view: one row per
line, priced by the price table of the reconcile that produced it) grouped by
--by. Categories: first_success, duplicate_submission, quality_failure,
retryable_failure, permanent_failure, unattributed (lines with unknown ids).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if job != "" {
				if _, err := jobDigest(job); err != nil {
					return err
				}
			}
			e, done, err := g.session(ctx, tenant)
			if err != nil {
				return err
			}
			defer done()
			var dims []string
			if by != "" {
				dims = strings.Split(by, ",")
			}
			rows, err := e.CostQuery(ctx, dims, job, tenant)
			if err != nil {
				return err
			}
			defer rows.Close()
			return writeRows(g.stdout, rows, format)
		},
	}
	c.Flags().StringVar(&job, "job", "", "only this job")
	c.Flags().StringVar(&tenant, "tenant", "", "only this tenant")
	c.Flags().StringVar(&by, "by", "category", "comma-separated: tenant, job, model, category, attempt, provider, record")
	c.Flags().StringVar(&format, "format", "table", "table, csv or json")
	return c
}
