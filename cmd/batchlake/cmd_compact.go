package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/reconcile"
)

func compactCmd(ctx context.Context, g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "compact",
		Short: "Gather every job's view rows into one compaction, so lake-wide sql reads a dozen files",
		Long: `compact reads every job of the lake as sql does (manifests, ingest records,
ledger events, reports and table files) and writes what the views read as one
content-addressed Parquet object per view source, then a marker under
compactions/ naming the jobs it covers and a fingerprint of each job's
markers. sql uses the latest compaction for the jobs whose markers are
unchanged since, and reads new and changed jobs live: the answers are the same
with or without it. verify checks the compaction's rows against its jobs'
sources. Run it again (after a day's jobs, say) to cover new jobs; nothing is
overwritten.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer l.Close()
			res, err := reconcile.Compact(ctx, l, g.engineOptions(), nil)
			if err != nil {
				return err
			}
			g.log.Info("compacted", "jobs", res.Jobs, "marker", res.Key)
			printJSON(g.stdout, res)
			return nil
		},
	}
}
