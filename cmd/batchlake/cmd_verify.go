package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/reconcile"
)

func verifyCmd(ctx context.Context, g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Re-hash every object in the lake and check manifests, tables and ledger agree (non-zero exit on any problem)",
		Long:  verifyLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer l.Close()
			rep, err := lake.Verify(ctx, l)
			if err != nil {
				return err
			}
			// A compaction's rows are checked against its jobs' sources
			// (DuckDB reads both), beside lake.Verify's check of its objects.
			cps, err := reconcile.VerifyCompactions(ctx, l, g.engineOptions())
			if err != nil {
				return err
			}
			rep.Problems = append(rep.Problems, cps...)
			for _, p := range rep.Problems {
				g.log.Warn(p.Message, "key", p.Key, "severity", p.Severity)
			}
			g.log.Info("verified", "objects", rep.Objects, "table_files", rep.TableFiles, "manifests", rep.Manifests,
				"ledger_events", rep.LedgerEvents, "errors", rep.Errors(), "warnings", rep.Warnings())
			printJSON(g.stdout, struct {
				lake.Report
				OK bool `json:"ok"`
			}{rep, rep.OK()})
			if !rep.OK() {
				return exitErr{exitError}
			}
			return nil
		},
	}
}
