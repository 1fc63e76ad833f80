package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/reconcile"
)

// loadPriceFlag reads a --prices file, or the shipped table for "".
func loadPriceFlag(path string) (*reconcile.PriceTable, error) {
	if path == "" {
		return reconcile.LoadPrices("", nil)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &errkind.UsageError{Msg: "--prices: " + err.Error()}
	}
	return reconcile.LoadPrices(filepath.Base(path), b)
}

func mustJob(hex string) lake.Digest { d, _ := lake.ParseDigest(hex); return d }

// minRecordsFor is --min-records for a provider: its default when unset (-1).
func minRecordsFor(flag int, provider string) (int, error) {
	switch {
	case flag == -1:
		return ingest.DefaultMinRecords(provider), nil
	case flag < -1:
		return 0, &errkind.UsageError{Msg: fmt.Sprintf("--min-records %d: want -1 (the provider's minimum), 0 (none) or a count of records", flag)}
	}
	return flag, nil
}

// refuseHeld fails (exit 2) when a job is held: a retry child below the
// provider's minimum records per batch job, which the provider would fail.
// allow (submit --below-min allow) sends it anyway.
func refuseHeld(m *lake.Manifest, allow string) error {
	if m.Held == "" || allow == ingest.BelowMinAllow {
		return nil
	}
	other := "Add these records to a larger job"
	if m.ParentJobKey != "" && hasRealTime(m) {
		other = fmt.Sprintf("Send them through the real-time API (batchlake retry --job %s --mode sync), add them to a larger job", m.ParentJobKey)
	}
	return &errkind.UsageError{Msg: fmt.Sprintf("submit: job %s is held: %s. %s fails batch jobs below its minimum of %d records: "+
		"nothing was sent. %s, or pass --below-min allow if your account's quota for %s is lower",
		m.JobKey[:12], m.Held, m.Provider, m.MinRecords, other, m.Model)}
}

func planCmd(ctx context.Context, g *globals) *cobra.Command {
	var o ingest.PlanOptions
	var prices string
	c := &cobra.Command{
		Use:   "plan",
		Short: "Validate a provider input JSONL and write its shards, expected rows and manifest",
		Long: `plan validates every line of a provider-format batch input file, computes
record ids and the job key (docs/contract.md), splits the records into shards within
the provider's limits and writes shards, expected rows and the manifest to the
lake. Planning the same records with the same settings again writes nothing.
Bad input exits 2 naming file, line and field, with nothing written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pt, err := loadPriceFlag(prices)
			if err != nil {
				return err
			}
			l, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer l.Close()
			o.TmpDir = g.tmpDir
			if o.MinRecords, err = minRecordsFor(o.MinRecords, o.Provider); err != nil {
				return err
			}
			var done func()
			o.Progress, done = g.progressFor("plan", o.Input, fileSize(o.Input), g.stderr)
			heap := new(goHeap)
			heap.percent(bulkGCPercent)
			o.MemoryLimit = heap.limit
			res, err := ingest.Plan(ctx, l, o)
			heap.restore()
			done()
			if err != nil {
				return err
			}
			g.log.Info(res.Message, "job", res.JobKey, "records", res.Records, "shards", len(res.Shards))
			// The manifest's token estimate, priced (for display: reconcile
			// prices it again with its own table).
			out := struct {
				*ingest.PlanResult
				Estimate *reconcile.Estimate `json:"estimate,omitempty"`
			}{PlanResult: res}
			if m, err := l.GetManifest(ctx, mustJob(res.JobKey)); err == nil {
				out.Estimate = reconcile.ManifestEstimate(pt, m)
			}
			printJSON(g.stdout, out)
			return nil
		},
	}
	registerPlanFlags(c, &o)
	c.Flags().StringVar(&o.Provider, "provider", "openai", "input format: openai, anthropic, bedrock, gemini, or sim (the built-in simulator: OpenAI's format, planned as a job of its own that only the simulator serves)")
	c.Flags().StringVar(&prices, "prices", "", "price table CSV to price the estimate with (default: the shipped sql/prices.csv)")
	return c
}

func registerPlanFlags(c *cobra.Command, o *ingest.PlanOptions) {
	f := c.Flags()
	f.StringVar(&o.Input, "input", "", "provider-format input JSONL (required)")
	f.StringVar(&o.Tenant, "tenant", "", "tenant (required; [A-Za-z0-9._-])")
	f.StringVar(&o.PromptVersion, "prompt-version", "", "prompt version (required)")
	f.StringVar(&o.SourceVersion, "source-version", "", "version of the source data")
	f.StringVar(&o.DatasetVersion, "dataset-version", "", "dataset version")
	f.StringVar(&o.Model, "model", "", "the job's model where input lines name none (required for bedrock and gemini)")
	f.StringVar(&o.KeyField, "key-field", "", "dotted path of the business key in each line (default: custom_id)")
	f.IntVar(&o.ShardMaxRecords, "shard-max-records", 0, "requests per shard (default and cap: the provider's limit)")
	f.Int64Var(&o.ShardMaxBytes, "shard-max-bytes", 0, "bytes per shard (default and cap: the provider's limit)")
	f.IntVar(&o.MinRecords, "min-records", -1, "fewest records per shard, the provider's per-job minimum: shards are balanced to it (-1: the provider's, bedrock 100, others none; 0: none)")
	f.StringVar(&o.BelowMin, "below-min", ingest.BelowMinRefuse, "an input (or a shard the byte limit cut) below --min-records: refuse (exit 2) or allow (plan anyway: your account's quota is lower)")
	f.StringVar(&o.SubmittedBy, "submitted-by", "", "who submits this job (manifest)")
	f.StringVar(&o.CostCenter, "cost-center", "", "cost center (manifest)")
	f.StringVar(&o.Retention, "retention", "", "data retention policy (manifest)")
	f.StringVar(&o.OutputSchemaVersion, "output-schema-version", "", "expected output schema version (manifest)")
	f.Int64Var(&o.Estimate.InputTokens, "est-input-tokens", 0, "estimated input tokens per record (default: request bytes / 4)")
	f.Int64Var(&o.Estimate.OutputTokens, "est-output-tokens", 0, "estimated output tokens per record whose request names no max_tokens (default 0)")
}
