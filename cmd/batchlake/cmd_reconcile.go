package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/reconcile"
)

type reconcileFlags struct {
	maxAttempts int
	retryable   string
	gate        string
	acceptTrunc bool
	prices      string
	schema      string
	maxTokens   int64
	maxCost     string
	notBefore   time.Duration
}

func (r *reconcileFlags) register(c *cobra.Command) {
	f := c.Flags()
	f.IntVar(&r.maxAttempts, "max-attempts", 3, "attempts a record gets before it goes to the manual queue")
	f.StringVar(&r.retryable, "retryable", "", "comma-separated HTTP statuses (429, 5xx) and error codes that are retryable (default: 408, 429, 5xx and the codes of docs/errors.md)")
	f.StringVar(&r.gate, "quality-gate", "", "extra SQL predicate a 2xx result must pass, e.g. \"tool_calls > 0\"")
	f.BoolVar(&r.acceptTrunc, "accept-truncated", false, "let an answer cut at its token limit (finish reason length, max_tokens, MAX_TOKENS, an incomplete response) succeed; by default it is quality_failed with reason truncated and retried")
	f.StringVar(&r.prices, "prices", "", "price table CSV replacing the shipped sql/prices.csv")
	f.StringVar(&r.schema, "output-schema", "", "JSON Schema every success line's output (parsed as JSON) must satisfy to pass the quality gate")
	f.Int64Var(&r.maxTokens, "max-record-tokens", 0, "a record whose input+output tokens over all its attempts reach this goes to the manual queue (token_cap) instead of retry; 0: no cap")
	f.StringVar(&r.maxCost, "max-record-cost-usd", "", "a record whose cost over all its attempts reaches this exact decimal goes to the manual queue (cost_cap) instead of retry")
	f.DurationVar(&r.notBefore, "retry-not-before", 0, "the retry child may be submitted no earlier than this long after the reconcile (submit exits 75 before)")
}

func (r *reconcileFlags) options(g *globals, job string) (reconcile.Options, error) {
	o := reconcile.Options{JobKey: job, MaxAttempts: r.maxAttempts, QualityGate: r.gate, AcceptTruncated: r.acceptTrunc, TmpDir: g.tmpDir,
		Engine: g.engineOptions()}
	o.Engine.MemoryLimit = g.memoryLimit(reconcileMemoryLimit)
	if r.maxAttempts < 1 {
		return o, &errkind.UsageError{Msg: fmt.Sprintf("--max-attempts %d: want 1 or more (1: no retries)", r.maxAttempts)}
	}
	if r.maxTokens < 0 {
		return o, &errkind.UsageError{Msg: "--max-record-tokens: want a non-negative count"}
	}
	if r.notBefore < 0 {
		return o, &errkind.UsageError{Msg: "--retry-not-before: want a non-negative duration"}
	}
	o.Caps.Tokens, o.RetryNotBefore = r.maxTokens, r.notBefore
	var err error
	if o.Caps.CostUSD, err = reconcile.ParseCostCap(r.maxCost); err != nil {
		return o, err
	}
	if r.retryable != "" {
		o.Retryable = strings.Split(r.retryable, ",")
		// Checked here, so that run refuses it before it plans and pays.
		if _, err := reconcile.ParseRules(o.Retryable); err != nil {
			return o, &errkind.UsageError{Msg: err.Error()}
		}
	}
	if r.schema != "" {
		b, err := os.ReadFile(r.schema)
		if err != nil {
			return o, &errkind.UsageError{Msg: "--output-schema: " + err.Error()}
		}
		if o.OutputSchema, err = reconcile.LoadOutputSchema(filepath.Base(r.schema), b); err != nil {
			return o, err
		}
	}
	if r.prices != "" {
		b, err := os.ReadFile(r.prices)
		if err != nil {
			return o, &errkind.UsageError{Msg: "--prices: " + err.Error()}
		}
		if o.Prices, err = reconcile.LoadPrices(filepath.Base(r.prices), b); err != nil {
			return o, err
		}
	}
	return o, nil
}

func reconcileCmd(ctx context.Context, g *globals) *cobra.Command {
	var job, out, partition string
	var rf reconcileFlags
	var lease time.Duration
	var merge bool
	var partitions int
	var allowRunning bool
	c := &cobra.Command{
		Use:   "reconcile",
		Short: "Run the set algebra for a job, write the report, retry shards and costs",
		Long: `reconcile classifies every expected record of --job in DuckDB (succeeded,
quality_failed, failed_retryable, failed_permanent, missing), finds unknown and
duplicate ids, prices every line and writes the report, retry shard(s) with
lineage and the outcomes and costs tables. Exit 0: COMPLETED; 10: PARTIAL, a
retry shard was written; 11: unknown or duplicate ids need review.

A job whose tracked batches are not all finished (a shard SUBMITTING,
SUBMITTED, RUNNING at a provider that has not said completed, failed,
expired or cancelled, or not sent while others were) exits 75: its records
would be counted missing and retried while they may still succeed. Run
status and collect until every batch is terminal, then reconcile.
--allow-running reconciles what has arrived anyway: no missing record goes
into a retry shard or the manual queue (disposition pending), and the shards
in flight stay with status and collect. Jobs whose results were ingested
from files (no batch tracked) are reconciled as they are.

Past one machine: --partition k/n (0 <= k < n) reconciles only the records
whose custom_id falls in partition k of n (by its hash), with their result lines, and
stores a partial result (exit 0; no ledger change); the n partitions may run
at once, anywhere. --merge then combines them into exactly the report, retry
shards, lineage and tables a single reconcile writes, and exits like one.
Give every partition and the merge the same flags; a merge with a partition
missing or run with other settings or files exits 2 and names it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := jobDigest(job); err != nil {
				return err
			}
			o, err := rf.options(g, job)
			if err != nil {
				return err
			}
			if lease <= 0 {
				return &errkind.UsageError{Msg: fmt.Sprintf("reconcile --lease %s: a reconciler must hold the job for a positive time", lease)}
			}
			o.OutDir, o.Lease, o.AllowRunning = out, lease, allowRunning
			if partition != "" && (merge || partitions != 0) {
				return &errkind.UsageError{Msg: "reconcile: --partition runs one partition; --merge (with --partitions) combines them: give one or the other"}
			}
			if partitions != 0 && !merge {
				return &errkind.UsageError{Msg: "reconcile: --partitions goes with --merge"}
			}
			l, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer l.Close()
			if partition != "" {
				p, err := lake.ParsePartition(partition)
				if err != nil {
					return &errkind.UsageError{Msg: "reconcile --partition: " + err.Error()}
				}
				res, err := reconcile.RunPartition(ctx, l, o, p)
				if err != nil {
					return err
				}
				msg := "reconciled partition"
				if res.Unchanged {
					msg = "partition already reconciled with these files and settings: nothing new written"
				}
				g.log.Info(msg, "job", res.JobKey[:12], "partition", res.Partition, "expected", res.Expected, "lines_unknown", res.Unknown)
				printJSON(g.stdout, res)
				return nil
			}
			run := reconcile.Run
			if merge {
				run = func(ctx context.Context, l *lake.Lake, o reconcile.Options) (*reconcile.Report, error) {
					return reconcile.Merge(ctx, l, o, partitions)
				}
			}
			heap := new(goHeap)
			o.MemoryLimit = heap.limit
			rep, err := run(ctx, l, o)
			heap.restore()
			if err != nil {
				return err
			}
			logReport(g, rep)
			printJSON(g.stdout, rep)
			if code := reportCode(rep); code != exitOK {
				return exitErr{code}
			}
			return nil
		},
	}
	c.Flags().StringVar(&job, "job", "", "job key, or a unique prefix of one (required)")
	c.Flags().DurationVar(&lease, "lease", 30*time.Minute, "how long a reconciler holds the job's shards (RECONCILING) before another may take over")
	c.Flags().StringVar(&out, "out", "", "also write report.json, retry-*.jsonl and retry-lineage.jsonl here, removing those an earlier reconcile wrote that this one does not (with --partition: partition-K-of-N.json)")
	c.Flags().StringVar(&partition, "partition", "", "reconcile only partition k/n (0 <= k < n) of the records, by the hash of their custom_id; combine with --merge")
	c.Flags().BoolVar(&merge, "merge", false, "combine the partition results of this job, files and flags into the report a single reconcile writes")
	c.Flags().IntVar(&partitions, "partitions", 0, "with --merge: how many partitions to combine (default: found in the lake)")
	c.Flags().BoolVar(&allowRunning, "allow-running", false, "reconcile although batches of the job are still running (otherwise exit 75): what has arrived is classified, no missing record is retried")
	rf.register(c)
	return c
}

func logReport(g *globals, r *reconcile.Report) {
	msg := "reconciled"
	if r.Unchanged {
		msg = "already reconciled with these files and settings: nothing new written"
	}
	g.log.Info(msg, "job", r.JobKey[:12], "state", r.State, "expected", r.Expected, "succeeded", r.Succeeded,
		"retry", r.RetryRecords, "manual", r.ManualRecords, "unknown", r.Unknown, "duplicate", r.Duplicate, "cost_usd", r.CostUSD["total"])
}
