package main

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

func ingestCmd(ctx context.Context, g *globals) *cobra.Command {
	var job, output, errs, providerJobID, shard string
	c := &cobra.Command{
		Use:   "ingest",
		Short: "Archive and normalise provider output and error files of a job submitted elsewhere",
		Long: `ingest archives each file raw and content-addressed, normalises every line into
attempt rows (matched to records by custom id, never by line number) and
quarantines lines it cannot read, with their raw bytes and line numbers.
Ingesting the same file again changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := jobDigest(job)
			if err != nil {
				return err
			}
			if output == "" && errs == "" {
				return &ingest.UsageError{Msg: "ingest: give --output and/or --errors"}
			}
			l, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer l.Close()
			m, err := l.GetManifest(ctx, d)
			if errors.Is(err, lake.ErrNotFound) {
				return &ingest.UsageError{Msg: "ingest: no job " + job + " in this lake (run plan first)"}
			}
			if err != nil {
				return err
			}
			if shard != "" {
				if _, ok := m.Shard(shard); !ok {
					return &ingest.UsageError{Msg: "ingest: --shard " + shard + " is not a shard of this job"}
				}
			}
			res := struct {
				JobKey string              `json:"job_key"`
				Files  []ingest.FileResult `json:"files"`
			}{JobKey: m.JobKey}
			for _, f := range []struct{ path, channel string }{{output, ingest.ChannelOutput}, {errs, ingest.ChannelError}} {
				if f.path == "" {
					continue
				}
				tell, done := g.progressFor("ingest", f.path, fileSize(f.path), g.stderr)
				fr, err := ingest.IngestFile(ctx, l, m, ingest.FileOptions{Path: f.path, Channel: f.channel, ProviderJobID: providerJobID, TmpDir: g.tmpDir, Progress: tell})
				done()
				if err != nil {
					return err
				}
				msg := "ingested"
				if !fr.Created {
					msg = "already ingested: nothing new written"
				}
				g.log.Info(msg, "file", fr.File, "channel", fr.Channel, "lines", fr.Lines, "quarantined", fr.Quarantined)
				res.Files = append(res.Files, fr)
			}
			printJSON(g.stdout, res)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&job, "job", "", "job key (required)")
	f.StringVar(&output, "output", "", "provider output JSONL")
	f.StringVar(&errs, "errors", "", "provider error JSONL")
	f.StringVar(&providerJobID, "provider-job-id", "", "the provider's batch id, recorded on every row")
	f.StringVar(&shard, "shard", "", "the shard these files belong to (optional: lines are matched by id)")
	return c
}
