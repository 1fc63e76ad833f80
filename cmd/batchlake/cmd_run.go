package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/hugepages"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lifecycle"
	"github.com/batchlake/batchlake/reconcile"
)

// generation is one job of a run: the first attempt or a retry child.
type generation struct {
	JobKey          string                 `json:"job_key"`
	Attempt         int                    `json:"attempt"`
	Expected        int64                  `json:"expected"`
	Succeeded       int64                  `json:"succeeded"`
	QualityFailed   int64                  `json:"quality_failed"`
	FailedRetryable int64                  `json:"failed_retryable"`
	FailedPermanent int64                  `json:"failed_permanent"`
	Missing         int64                  `json:"missing"`
	Unknown         int64                  `json:"unknown"`
	Duplicate       int64                  `json:"duplicate"`
	Quarantined     int64                  `json:"quarantined"`
	RetryRecords    int64                  `json:"retry_records"`
	ManualRecords   int64                  `json:"manual_records"`
	State           lake.State             `json:"state"`
	CostUSD         map[string]json.Number `json:"cost_usd"`
	Report          string                 `json:"report"`
}

type runResult struct {
	JobKey    string `json:"job_key"`
	Records   int64  `json:"records"`
	Succeeded int64  `json:"succeeded"`
	Manual    int64  `json:"manual"`
	Pending   int64  `json:"pending"`
	// Untranslatable are records a --fallback retry left for manual
	// handling because their requests do not translate.
	Untranslatable int64        `json:"untranslatable,omitempty"`
	CostUSD        json.Number  `json:"cost_usd"`
	Generations    []generation `json:"generations"`
	LastReport     any          `json:"last_report"`
	Next           string       `json:"next"`
}

func runCmd(ctx context.Context, g *globals) *cobra.Command {
	var (
		po        ingest.PlanOptions
		pf        providerFlags
		rf        reconcileFlags
		maxRounds int
		poll      time.Duration
		out       string
		fbf       *runFallback
		sf        syncFlags
	)
	c := &cobra.Command{
		Use:   "run",
		Short: "The whole loop for --input: plan, submit, status, collect, reconcile, retry, until only manual work is left",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if maxRounds < 1 {
				return &errkind.UsageError{Msg: fmt.Sprintf("run --max-rounds %d: want 1 or more", maxRounds)}
			}
			if err := sf.check(false); err != nil {
				return err
			}
			// The reconcile flags are checked before anything is planned
			// or sent: found wrong at the first reconcile, they would have
			// waited for a paid batch to finish.
			ro, err := rf.options(g, "")
			if err != nil {
				return err
			}
			if po.MinRecords, err = minRecordsFor(po.MinRecords, pf.target); err != nil {
				return err
			}
			if poll <= 0 {
				return &errkind.UsageError{Msg: fmt.Sprintf("run --poll %s: want a positive interval between the provider's status calls", poll)}
			}
			if err := fbf.parse(); err != nil {
				return err
			}
			// A run waits for its batches, for hours, between steps of
			// hundreds of megabytes: its memory stays in small pages, which
			// the kernel does not make whole again while it waits.
			hugepages.Disable()
			l, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer l.Close()
			if out != "" {
				// Each round's reconcile writes a folder under it.
				if err := reconcile.GuardOutput(l, g.cacheDir, "run --out", out, true); err != nil {
					return err
				}
			}
			if ro.QualityGate != "" {
				if err := reconcile.CheckGate(ctx, l, ro.Engine, ro.QualityGate); err != nil {
					return err
				}
			}
			// The simulator is the one the step commands use: the fake
			// OpenAI server, in-process on loopback with its state in the
			// lake, spoken to by the real openai-go adapter.
			drv, done, err := pf.driver(g, l)
			if err != nil {
				return err
			}
			defer done()
			if pf.target == ingest.SimProvider {
				g.log.Info("simulated provider: fake OpenAI server on loopback, its state in the lake", "lost_create_responses", pf.simLostCreates)
			}
			po.TmpDir = g.tmpDir
			// The job is planned for the provider run talks to; with sim it
			// is a simulated job (OpenAI's file format, a job key of its own).
			po.Provider = pf.target
			heap := new(goHeap)
			heap.percent(bulkGCPercent)
			po.MemoryLimit = heap.limit
			plan, err := ingest.Plan(ctx, l, po)
			heap.restore()
			if err != nil {
				return err
			}
			if m, err := l.GetManifest(ctx, mustJob(plan.JobKey)); err != nil {
				return err
			} else if m.Provider != drv.Target {
				return &errkind.UsageError{Msg: fmt.Sprintf("run --provider %s: job %s was already planned for provider %s; a job's steps talk to its own provider", pf.target, m.JobKey, m.Provider)}
			}
			g.log.Info("plan: "+plan.Message, "job", plan.JobKey[:12], "records", plan.Records, "shards", len(plan.Shards))
			res := runResult{JobKey: plan.JobKey, Records: plan.Records}
			total := reconcile.NewDecimal()
			job := plan.JobKey
			var last *reconcile.Report
			for round := 1; ; round++ {
				d, _ := lake.ParseDigest(job)
				if last, err = sf.round(ctx, g, drv, nil, d, rf, poll, out); err != nil {
					return err
				}
				gen := generation{JobKey: last.JobKey, Attempt: last.Attempt, Expected: last.Expected, Succeeded: last.Succeeded,
					QualityFailed: last.QualityFailed, FailedRetryable: last.FailedRetryable, FailedPermanent: last.FailedPermanent,
					Missing: last.Missing, Unknown: last.Unknown, Duplicate: last.Duplicate, Quarantined: last.Quarantined,
					RetryRecords: last.RetryRecords, ManualRecords: last.ManualRecords, State: last.State, CostUSD: last.CostUSD, Report: last.Report}
				res.Generations = append(res.Generations, gen)
				res.Succeeded += last.Succeeded
				res.Manual += last.ManualRecords
				if err := total.Add(string(last.CostUSD["total"])); err != nil {
					return err
				}
				if last.RetryRecords == 0 {
					break
				}
				if round >= maxRounds {
					res.Pending = last.RetryRecords
					break
				}
				// Run again on a job it ran before (a restarted step), run
				// goes on with the child it sent then, not another child of
				// the same records.
				next, err := reconcile.SentChild(ctx, l, job)
				if err != nil {
					return err
				}
				if next != "" {
					g.log.Info("retry: a child of this job was sent before, by an earlier run: going on with it", "parent", job[:12], "child", next[:12])
				} else {
					ro := reconcile.RetryOptions{TmpDir: g.tmpDir, MemoryLimit: heap.limit}
					fbf.retryOptions(round, &ro)
					rr, err := reconcile.RetryWith(ctx, l, d, ro)
					heap.restore()
					if err != nil {
						return err
					}
					g.log.Info("retry: "+rr.Message, "parent", job[:12])
					res.Untranslatable += int64(len(rr.Untranslatable))
					if rr.Child == nil { // nothing left to send: the rest does not translate
						res.Pending = last.RetryRecords - int64(len(rr.Untranslatable))
						break
					}
					next = rr.Child.JobKey
				}
				job = next
				cm, err := l.GetManifest(ctx, mustJob(job))
				if err != nil {
					return err
				}
				var release func()
				if drv, release, err = fbf.driverFor(g, l, pf, cm, drv); err != nil {
					return err
				}
				defer release()
			}
			res.CostUSD = json.Number(total.String())
			res.LastReport = last
			// Every record ends accepted, in the manual queue, or pending: nothing is lost.
			if res.Succeeded+res.Manual+res.Pending+res.Untranslatable != res.Records {
				return fmt.Errorf("run: %d records planned but %d succeeded + %d manual + %d pending + %d untranslatable", res.Records, res.Succeeded, res.Manual, res.Pending, res.Untranslatable)
			}
			res.Next = fmt.Sprintf("batchlake sql --lake %s \"SELECT final_state, count(*) AS records, sum(cost_usd) AS cost_usd FROM records GROUP BY ALL\"", g.lakeURL)
			g.log.Info("run finished", "records", res.Records, "succeeded", res.Succeeded, "manual", res.Manual, "pending", res.Pending,
				"generations", len(res.Generations), "cost_usd", res.CostUSD)
			g.log.Info("next, try: " + res.Next)
			printJSON(g.stdout, res)
			if res.Pending > 0 {
				return exitErr{exitPartial}
			}
			return nil
		},
	}
	registerPlanFlags(c, &po)
	pf.register(c, "sim")
	rf.register(c)
	fbf = addRunFallbackFlags(c)
	sf.mode = "auto"
	sf.registerTail(c)
	c.Flags().IntVar(&maxRounds, "max-rounds", 10, "stop after this many submit-reconcile rounds")
	c.Flags().IntVar(&pf.simLostCreates, "sim-lost-creates", 1, "with --provider sim: the fake server drops this many create responses (the batch exists; submit must find it, not create it again)")
	c.Flags().DurationVar(&poll, "poll", 2*time.Second, "status poll interval")
	c.Flags().StringVar(&out, "out", "", "write each round's report and retry files under DIR/<job_key>/")
	return c
}

// runRound submits, waits, collects and reconciles one job.
func runRound(ctx context.Context, g *globals, drv *lifecycle.Driver, job lake.Digest, rf reconcileFlags, poll time.Duration, out string) (*reconcile.Report, error) {
	wait := func(name string, step func(context.Context, lake.Digest) (*lifecycle.Result, error)) error {
		for {
			res, err := step(ctx, job)
			if err != nil {
				return err
			}
			for _, sh := range res.Shards {
				switch sh.Action {
				case "created", "found", "unknown", "leased", "waiting":
					g.log.Info(name+": "+sh.Action, "shard", sh.ShardID, "provider_job_id", sh.ProviderJobID, "detail", sh.Detail)
				}
			}
			if !res.Pending {
				return nil
			}
			g.log.Info(name+": not finished yet", "job", job.Hex()[:12], "poll", poll)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(poll):
			}
		}
	}
	m, err := drv.Lake.GetManifest(ctx, job)
	if err != nil {
		return nil, err
	}
	if err := refuseHeld(m, ""); err != nil {
		return nil, err
	}
	if err := wait("submit", drv.Submit); err != nil {
		return nil, err
	}
	g.log.Info("submitted", "job", job.Hex()[:12])
	if err := wait("status", drv.Status); err != nil {
		return nil, err
	}
	res, err := drv.Collect(ctx, job)
	if err != nil {
		return nil, err
	}
	g.log.Info("collected", "job", job.Hex()[:12], "shards", len(res.Shards))
	return reconcileRound(ctx, g, drv, job, rf, out)
}

// reconcileRound reconciles one job of a run.
func reconcileRound(ctx context.Context, g *globals, drv *lifecycle.Driver, job lake.Digest, rf reconcileFlags, out string) (*reconcile.Report, error) {
	o, err := rf.options(g, job.Hex())
	if err != nil {
		return nil, err
	}
	if out != "" {
		o.OutDir = out + "/" + job.Hex()
	}
	heap := new(goHeap)
	o.MemoryLimit = heap.limit
	rep, err := reconcile.Run(ctx, drv.Lake, o)
	heap.restore()
	if err != nil {
		return nil, err
	}
	logReport(g, rep)
	return rep, nil
}
