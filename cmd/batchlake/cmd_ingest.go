package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

func ingestCmd(ctx context.Context, g *globals) *cobra.Command {
	var job, output, errs, providerJobID, shard, summary string
	c := &cobra.Command{
		Use:   "ingest",
		Short: "Archive and normalise provider output and error files of a job submitted elsewhere",
		Long: `ingest archives each file raw and content-addressed, normalises every line into
attempt rows (matched to records by custom id, never by line number) and
quarantines lines it cannot read, with their raw bytes and line numbers.
Ingesting the same file again changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output == "" && errs == "" {
				return &ingest.UsageError{Msg: "ingest: give --output and/or --errors"}
			}
			l, d, err := g.openJob(ctx, job)
			if err != nil {
				return err
			}
			defer l.Close()
			m, err := l.GetManifest(ctx, d)
			if errors.Is(err, lake.ErrNotFound) {
				return lake.JobNotFound(job, l.URL)
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
				JobKey  string               `json:"job_key"`
				Files   []ingest.FileResult  `json:"files"`
				Summary *ingest.SummaryCheck `json:"summary_check,omitempty"`
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
			if summary != "" {
				expected := m.ExpectedRecords
				if s, ok := m.Shard(shard); ok {
					expected = s.Records
				}
				if res.Summary, err = checkBedrockSummary(ctx, l, m, summary, output, errs, providerJobID, expected); err != nil {
					return err
				}
				for _, d := range res.Summary.Differences {
					g.log.Warn("bedrock manifest.json.out disagrees with the result lines", "difference", d.String())
				}
			}
			printJSON(g.stdout, res)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&job, "job", "", "job key, or a unique prefix of one (required)")
	f.StringVar(&output, "output", "", "provider output JSONL")
	f.StringVar(&errs, "errors", "", "provider error JSONL")
	f.StringVar(&providerJobID, "provider-job-id", "", "the provider's batch id, recorded on every row")
	f.StringVar(&shard, "shard", "", "the shard these files belong to (optional: lines are matched by id)")
	f.StringVar(&summary, "summary", "", "Bedrock manifest.json.out: archived and cross-checked against the result lines")
	return c
}

// checkBedrockSummary archives a manifest.json.out content-addressed and
// compares its counts with what the output and error files' lines add up to.
func checkBedrockSummary(ctx context.Context, l *lake.Lake, m *lake.Manifest, path, output, errs, providerJobID string, expected int64) (*ingest.SummaryCheck, error) {
	if m.Provider != "bedrock" {
		return nil, &ingest.UsageError{Msg: "ingest --summary: only Bedrock jobs have a manifest.json.out; this job is " + m.Provider}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &ingest.UsageError{Msg: "ingest --summary: " + err.Error()}
	}
	// Archived with an ingest record (channel summary), so reconcile reports
	// the summary's token totals beside the lines' (provider_totals).
	if err := ingest.RecordSummary(ctx, l, m, filepath.Base(path), providerJobID, data, time.Now()); err != nil {
		return nil, err
	}
	var paths []string
	for _, p := range []string{output, errs} {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return ingest.CheckBedrockSummary(ctx, l, filepath.Base(path), data, paths, expected)
}
