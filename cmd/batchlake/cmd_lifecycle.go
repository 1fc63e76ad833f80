package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/sim"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lifecycle"
	"github.com/batchlake/batchlake/providers"
	"github.com/batchlake/batchlake/providers/anthropicbatch"
	"github.com/batchlake/batchlake/providers/geminibatch"
	"github.com/batchlake/batchlake/providers/openaibatch"
)

type providerFlags struct {
	target  string
	simSeed uint64
	// simLostCreates is how many create responses the simulator drops (run's --sim-lost-creates).
	simLostCreates int
	lease          time.Duration
	bedrock        bedrockFlags
	// The submit protocol's timings (docs/submission.md).
	takeoverMargin, settle, lostLookup time.Duration
	// maxInFlight bounds the job's unfinished batches (submit and run).
	maxInFlight int
	// parallel is how many shards submit works on at a time (submit and run).
	parallel int
}

// providerHelp names the providers and where their credentials come from.
const providerHelp = "sim (built-in simulator), openai (OPENAI_API_KEY, OPENAI_BASE_URL), anthropic (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL), gemini (GEMINI_API_KEY, GOOGLE_GEMINI_BASE_URL) or bedrock (AWS default chain; --bedrock-*)"

// register adds the provider flags. Without a default (submit, status,
// collect, cancel) the provider is the job's, from its manifest, and a
// --provider given must name it; run plans the job, so its --provider is
// the one the job is planned for.
func (p *providerFlags) register(c *cobra.Command, def string) {
	help := "the job's provider, checked against the one it was planned for (default: that one, from the job's manifest; another is exit 2): " + providerHelp
	if def != "" {
		help = "provider to plan the job for and talk to: " + providerHelp
	}
	c.Flags().StringVar(&p.target, "provider", def, help)
	c.Flags().Uint64Var(&p.simSeed, "sim-seed", 1, "seed of the simulated provider (env BATCHLAKE_SIM_SEED)")
	envFlag(c, "sim-seed", "BATCHLAKE_SIM_SEED")
	c.Flags().DurationVar(&p.lease, "lease", 10*time.Minute, "how long a submitter holds a shard before another may take over")
	c.Flags().DurationVar(&p.takeoverMargin, "takeover-margin", lake.DefaultTakeoverMargin, "how long past a submitter's lease expiry another waits before taking the shard over: the clock skew between machines (0: none; env BATCHLAKE_TAKEOVER_MARGIN)")
	envFlag(c, "takeover-margin", "BATCHLAKE_TAKEOVER_MARGIN")
	c.Flags().DurationVar(&p.settle, "settle", 0, "after a lost create answer the batch was not found: how long the shard waits for the provider's listing to catch up before any submitter looks it up (0: the provider's default; env BATCHLAKE_SETTLE)")
	envFlag(c, "settle", "BATCHLAKE_SETTLE")
	c.Flags().DurationVar(&p.lostLookup, "lost-lookup", lifecycle.DefaultLostLookup, "after a lost create answer: how long the submitter keeps looking the batch up itself, with backoff (0: it does not; env BATCHLAKE_LOST_LOOKUP)")
	envFlag(c, "lost-lookup", "BATCHLAKE_LOST_LOOKUP")
	if c.Name() == "submit" || c.Name() == "run" {
		c.Flags().IntVar(&p.maxInFlight, "max-in-flight", 0, "create a batch only while fewer than this many of the job's batches are unfinished at the provider; the other shards wait (submit: exit 75, run again later; run: waits). Keeps a backfill under the provider's enqueued-token limit (0: no limit; env BATCHLAKE_MAX_IN_FLIGHT)")
		envFlag(c, "max-in-flight", "BATCHLAKE_MAX_IN_FLIGHT")
		c.Flags().IntVar(&p.parallel, "parallel", 1, "how many shards to submit at a time, each with its own lease, lookup, upload and create: shards upload side by side (env BATCHLAKE_SUBMIT_PARALLEL)")
		envFlag(c, "parallel", "BATCHLAKE_SUBMIT_PARALLEL")
	}
	p.bedrock.register(c)
}

// check refuses settings no driver can run with.
func (p *providerFlags) check() error {
	if p.maxInFlight < 0 {
		return &errkind.UsageError{Msg: fmt.Sprintf("--max-in-flight %d: want 0 (no limit) or a positive number of batches", p.maxInFlight)}
	}
	if p.parallel < 0 {
		return &errkind.UsageError{Msg: fmt.Sprintf("--parallel %d: want a number of shards at a time (0 or 1: one)", p.parallel)}
	}
	if p.simLostCreates < 0 {
		return &errkind.UsageError{Msg: fmt.Sprintf("--sim-lost-creates %d: want a count of create answers to drop (0: none)", p.simLostCreates)}
	}
	// A lease already run out, or a margin below zero, would let a second
	// submitter take a shard over while the first still creates its batch.
	if p.lease <= 0 {
		return &errkind.UsageError{Msg: fmt.Sprintf("--lease %s: a submitter must hold a shard for a positive time", p.lease)}
	}
	for _, d := range []struct {
		flag, zero string
		v          time.Duration
	}{{"takeover-margin", "none", p.takeoverMargin}, {"settle", "the provider's default", p.settle}, {"lost-lookup", "no lookups of its own", p.lostLookup}} {
		if d.v < 0 {
			return &errkind.UsageError{Msg: fmt.Sprintf("--%s %s: want a duration of 0 (%s) or more", d.flag, d.v, d.zero)}
		}
	}
	return nil
}

// lostLookupSetting is --lost-lookup as lifecycle.Driver takes it: 0 turns
// the submitter's own lookups off.
func (p *providerFlags) lostLookupSetting() time.Duration {
	if p.lostLookup == 0 {
		return -1
	}
	return p.lostLookup
}

// envAnnotation marks a flag that an environment variable sets (envFlag).
const envAnnotation = "batchlake_env"

// envFlag names the environment variable that sets flag name of c when the
// command line does not; applyEnvFlags reads it before the command runs.
func envFlag(c *cobra.Command, name, env string) {
	if err := c.Flags().SetAnnotation(name, envAnnotation, []string{env}); err != nil {
		panic(err) // a flag registered under another name: a programming error
	}
}

// applyEnvFlags sets each flag of cmd that an environment variable sets
// (envFlag) and its command line leaves alone, parsed as the flag's own
// value is: a value it cannot read is bad usage naming the variable, where
// a step configured by a DAG's environment once took the default in silence.
func applyEnvFlags(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		env := f.Annotations[envAnnotation]
		if err != nil || len(env) == 0 || f.Changed {
			return
		}
		if v := os.Getenv(env[0]); v != "" {
			if serr := f.Value.Set(v); serr != nil {
				err = &errkind.UsageError{Msg: fmt.Sprintf("%s=%q (--%s): %v", env[0], v, f.Name, serr)}
			}
		}
	})
	return err
}

// envList is a comma-separated environment variable's items, nil if unset.
func envList(k string) []string {
	var out []string
	for _, v := range strings.Split(os.Getenv(k), ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// envInt64 is environment variable k as an integer, def when it is unset.
func envInt64(k string, def int64) (int64, error) {
	s := os.Getenv(k)
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, &errkind.UsageError{Msg: fmt.Sprintf("%s=%q: want an integer", k, s)}
	}
	return v, nil
}

// driverFor builds the lifecycle driver for a job: its provider is the one
// in the manifest; a --provider given must agree.
func (p *providerFlags) driverFor(g *globals, l *lake.Lake, m *lake.Manifest) (*lifecycle.Driver, func(), error) {
	if p.target != "" && p.target != m.Provider {
		return nil, nil, &errkind.UsageError{Msg: fmt.Sprintf("--provider %s: job %s was planned for provider %s; a job's steps talk to its own provider (leave --provider out, or give %s)",
			p.target, m.JobKey, m.Provider, m.Provider)}
	}
	q := *p
	q.target = m.Provider
	return q.driver(g, l)
}

// driver builds the lifecycle driver for a target provider, and the
// function that releases what it started (the simulator's server on
// loopback) once the command is done with it.
func (p *providerFlags) driver(g *globals, l *lake.Lake) (*lifecycle.Driver, func(), error) {
	if err := p.check(); err != nil {
		return nil, nil, err
	}
	done := func() {}
	d, err := p.driverWith(g, l, &done)
	if err != nil {
		done()
		return nil, nil, err
	}
	return d, done, nil
}

func (p *providerFlags) driverWith(g *globals, l *lake.Lake, done *func()) (*lifecycle.Driver, error) {
	var c providers.Client
	switch p.target {
	case "sim":
		s, err := sim.Start(l, sim.Options{Seed: p.simSeed, LostCreates: p.simLostCreates, Logger: g.log})
		if err != nil {
			return nil, err
		}
		*done = func() {
			if err := s.Close(); err != nil {
				g.log.Warn("simulated provider: closing the fake OpenAI server", "error", err)
			}
		}
		g.log.Debug("simulated provider: fake OpenAI server on loopback, its state in the lake", "url", s.URL(), "lost_create_responses", p.simLostCreates)
		c = s
	case "openai":
		oc, err := openaibatch.New(openaibatch.Config{Logger: g.log})
		if err != nil {
			return nil, &errkind.UsageError{Msg: "--provider openai: " + err.Error()}
		}
		c = oc
	case "bedrock":
		bc, err := p.bedrock.client(g, l)
		if err != nil {
			return nil, err
		}
		c = bc
	case "anthropic":
		ac, err := anthropicbatch.New(anthropicbatch.Config{Logger: g.log, Shards: lifecycle.LakeShards{Lake: l}, TmpDir: g.tmpDir})
		if err != nil {
			return nil, &errkind.UsageError{Msg: "--provider anthropic: " + err.Error()}
		}
		c = ac
	case "gemini":
		inline, err := envInt64("BATCHLAKE_GEMINI_INLINE_MAX_BYTES", 0)
		if err != nil {
			return nil, err
		}
		gc, err := geminibatch.New(geminibatch.Config{Logger: g.log, Jobs: lifecycle.LakeShards{Lake: l}, InlineMaxBytes: inline,
			UploadMIMETypes: envList("BATCHLAKE_GEMINI_UPLOAD_MIME")})
		if err != nil {
			return nil, &errkind.UsageError{Msg: "--provider gemini: " + err.Error()}
		}
		c = gc
	default:
		return nil, &errkind.UsageError{Msg: fmt.Sprintf("--provider %q: want sim, openai, anthropic, gemini or bedrock", p.target)}
	}
	g2 := lake.NewLedger(l, "")
	g2.TakeoverMargin = p.takeoverMargin
	return &lifecycle.Driver{Lake: l, Ledger: g2, Client: c, Target: p.target, Lease: p.lease, TmpDir: g.tmpDir,
		Settle: p.settle, LostLookup: p.lostLookupSetting(), MaxInFlight: p.maxInFlight, Parallel: p.parallel}, nil
}

const jobProviderHelp = `The provider is the job's: the one plan recorded in its manifest (plan
--provider). --provider may be left out; one that names another provider is
exit 2 and nothing is sent. The simulator (sim) serves only jobs planned with
--provider sim. A shard bound to a batch of another provider (an older
version's default) is exit 2 for submit, status and collect; cancel closes
such shards in the ledger without calling any provider, then plan the records
again as a new job.`

const submitChildHelp = `A retry child that a newer retry of its parent superseded is exit 2 naming
the newer child; so is a child with records whose latest state is succeeded
(in its parent's newest reconcile or a sibling's): run retry on the parent
again.`

// checkWait refuses a --wait that would ask the provider without a pause
// between its calls (a poll of 0 or less), or a timeout below zero.
func checkWait(wait bool, poll, timeout time.Duration) error {
	if wait && poll <= 0 {
		return &errkind.UsageError{Msg: fmt.Sprintf("--poll %s: want a positive interval between the provider's status calls", poll)}
	}
	if timeout < 0 {
		return &errkind.UsageError{Msg: fmt.Sprintf("--timeout %s: want a duration of 0 (wait for ever) or more", timeout)}
	}
	return nil
}

// lifecycleCmd builds submit, status, collect and cancel, which share their shape.
func lifecycleCmd(ctx context.Context, g *globals, use, short string, step func(context.Context, *lifecycle.Driver, lake.Digest, bool) (*lifecycle.Result, error), pendingCode int) *cobra.Command {
	var job string
	var pf providerFlags
	var wait bool
	var poll, timeout time.Duration
	var shard string
	var belowMin string
	long := lifecycleLong[use] + "\n\n" + jobProviderHelp
	if use == "submit" {
		long += "\n\n" + submitChildHelp
	}
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkWait(wait, poll, timeout); err != nil {
				return err
			}
			l, d, err := g.openJob(ctx, job)
			if err != nil {
				return err
			}
			defer l.Close()
			m, err := l.GetManifest(ctx, d)
			if errors.Is(err, lake.ErrNotFound) {
				return lake.JobNotFound(d.Hex(), l.URL)
			}
			if err != nil {
				return err
			}
			if use == "submit" {
				if err := refuseHeld(m, belowMin); err != nil {
					return err
				}
			}
			drv, done, err := pf.driverFor(g, l, m)
			if err != nil {
				return err
			}
			defer done()
			drv.Shard = shard
			deadline := time.Now().Add(timeout)
			for {
				res, err := step(ctx, drv, d, wait)
				if err != nil {
					return err
				}
				res.State = lake.JobState(shardStates(res))
				timedOut := wait && timeout > 0 && !time.Now().Before(deadline)
				if !res.Pending || !wait || timedOut {
					for _, s := range res.Shards {
						g.log.Info(use, "shard", s.ShardID, "state", s.State, "action", s.Action, "provider_job_id", s.ProviderJobID, "provider_status", s.ProviderStatus)
						if s.Detail != "" {
							g.log.Warn(use+": "+s.Detail, "shard", s.ShardID)
						}
					}
					printJSON(g.stdout, res)
					if res.Pending && pendingCode != 0 {
						return exitErr{pendingCode}
					}
					return nil
				}
				g.log.Info("waiting", "step", use, "poll", poll)
				sleep := poll
				if left := time.Until(deadline); timeout > 0 && left < sleep {
					sleep = left
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(sleep):
				}
			}
		},
	}
	c.Flags().StringVar(&job, "job", "", "job key, or a unique prefix of one (required)")
	if use == "status" {
		c.Flags().BoolVar(&wait, "wait", false, "poll until every shard is terminal")
		c.Flags().DurationVar(&poll, "poll", 30*time.Second, "poll interval with --wait")
		c.Flags().DurationVar(&timeout, "timeout", 0, "with --wait, give up after this long and exit 75 if any shard is still not terminal (default: wait for ever)")
	}
	if use == "submit" {
		c.Flags().StringVar(&belowMin, "below-min", ingest.BelowMinRefuse, "a job held below the provider's minimum records per batch job (a small retry child): refuse (exit 2) or allow (send it anyway: your account's quota is lower)")
	}
	if use == "collect" {
		c.Flags().StringVar(&shard, "shard", "", "collect only this shard (to collect shards in parallel)")
	}
	pf.register(c, "")
	return c
}

func submitCmd(ctx context.Context, g *globals) *cobra.Command {
	return lifecycleCmd(ctx, g, "submit", "Bind every shard of a job to exactly one provider batch (exit 75: run again later)",
		func(ctx context.Context, d *lifecycle.Driver, j lake.Digest, _ bool) (*lifecycle.Result, error) {
			return d.Submit(ctx, j)
		}, exitTempFail)
}

func statusCmd(ctx context.Context, g *globals) *cobra.Command {
	return lifecycleCmd(ctx, g, "status", "Poll the provider and record state changes (exit 0: all terminal, 75: not yet)",
		func(ctx context.Context, d *lifecycle.Driver, j lake.Digest, _ bool) (*lifecycle.Result, error) {
			return d.Status(ctx, j)
		}, exitTempFail)
}

func collectCmd(ctx context.Context, g *globals) *cobra.Command {
	return lifecycleCmd(ctx, g, "collect", "Download, archive and ingest the results of terminal batches (also cancelled and expired)",
		func(ctx context.Context, d *lifecycle.Driver, j lake.Digest, _ bool) (*lifecycle.Result, error) {
			return d.Collect(ctx, j)
		}, exitTempFail)
}

func cancelCmd(ctx context.Context, g *globals) *cobra.Command {
	return lifecycleCmd(ctx, g, "cancel", "Cancel the remote batches of a job; collect and reconcile keep what finished",
		func(ctx context.Context, d *lifecycle.Driver, j lake.Digest, _ bool) (*lifecycle.Result, error) {
			return d.Cancel(ctx, j)
		}, 0)
}

func shardStates(r *lifecycle.Result) []lake.State {
	out := make([]lake.State, len(r.Shards))
	for i, s := range r.Shards {
		out[i] = s.State
	}
	return out
}
