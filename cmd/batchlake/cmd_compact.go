package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/reconcile"
)

func compactCmd(ctx context.Context, g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "compact",
		Short: "Gather the jobs' view rows into a few segments, so lake-wide sql reads a few dozen files",
		Long: `compact reads the jobs that are new or changed since the latest compaction
as sql does (manifests, ingest records, ledger events, reports and table
files) and writes what the views read of them as a segment: one
content-addressed Parquet object per view source. Then it writes a marker
under compactions/ naming the jobs it covers, a fingerprint of each job's
markers and the segment holding its rows. The latest compaction's segments
whose jobs are all unchanged are named again, not written; a segment holding a
changed job, and the newest segments no larger than the new one, are written
again into it, so segments stay few and the lake grows by about the new rows.
With no job new or changed, nothing is written and the latest compaction's key
is printed.

sql uses the latest compaction for the jobs whose markers are unchanged since,
and reads new and changed jobs live: the answers are the same with or without
it. verify checks the compaction's rows against its jobs' sources. Run it
again (after a day's jobs, say) to cover new jobs; nothing is overwritten.`,
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
			g.log.Info("compacted", "jobs", res.Jobs, "segments", res.Segments, "jobs_written", res.JobsWritten, "marker", res.Key)
			printJSON(g.stdout, res)
			return nil
		},
	}
}
