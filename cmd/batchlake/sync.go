package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/sim"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lifecycle"
	"github.com/batchlake/batchlake/providers"
	"github.com/batchlake/batchlake/providers/anthropicbatch"
	"github.com/batchlake/batchlake/providers/bedrockbatch"
	"github.com/batchlake/batchlake/providers/geminibatch"
	"github.com/batchlake/batchlake/providers/openaibatch"
	"github.com/batchlake/batchlake/reconcile"
)

// syncFlags choose how a retry child is sent: as a batch (plan it, submit
// later) or through the provider's real-time API at once (the sync tail).
type syncFlags struct {
	mode        string
	syncBelow   int64
	concurrency int
	maybeSent   string
	lease       time.Duration
	margin      time.Duration
	simSeed     uint64
}

func (f *syncFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.mode, "mode", "auto", "how the child is sent: batch (plan it for submit), sync (send its records now through the provider's real-time API, priced on demand), or auto (sync when the child is below the provider's minimum records per batch job or below --sync-below; batch otherwise)")
	f.registerTail(c)
	c.Flags().DurationVar(&f.lease, "lease", 10*time.Minute, "how long a sender holds a shard (renewed while it runs) before another may take over")
	c.Flags().DurationVar(&f.margin, "takeover-margin", lake.DefaultTakeoverMargin, "how long past a sender's lease expiry another waits before taking the shard over (env BATCHLAKE_TAKEOVER_MARGIN)")
	envFlag(c, "takeover-margin", "BATCHLAKE_TAKEOVER_MARGIN")
	c.Flags().Uint64Var(&f.simSeed, "sim-seed", 1, "seed of the simulated provider (env BATCHLAKE_SIM_SEED)")
	envFlag(c, "sim-seed", "BATCHLAKE_SIM_SEED")
}

// registerTail adds the flags retry and run share: when a retry child goes
// through the real-time API, and how.
func (f *syncFlags) registerTail(c *cobra.Command) {
	c.Flags().Int64Var(&f.syncBelow, "sync-below", 0, "send a retry child of fewer records than this through the provider's real-time API instead of a batch (0: only a child below the provider's minimum records per batch job)")
	c.Flags().IntVar(&f.concurrency, "concurrency", lifecycle.DefaultConcurrency, "real-time calls in flight at once (the sync tail)")
	c.Flags().StringVar(&f.maybeSent, "maybe-sent", "resend", "a record whose earlier real-time call may have reached the provider without an answer (after a crash): resend (a counted duplicate submission) or leave (counted failed, retryable)")
}

// check refuses values of the flags that no sending takes, before retry
// plans a child (which a refusal after it would leave planned with the
// settings of the run that failed); lease asks for retry's own --lease and
// --takeover-margin too (run sends with its provider flags').
func (f *syncFlags) check(lease bool) error {
	switch f.mode {
	case "batch", "sync", "auto":
	default:
		return &errkind.UsageError{Msg: fmt.Sprintf("--mode %q: want batch, sync or auto", f.mode)}
	}
	if f.maybeSent != "resend" && f.maybeSent != "leave" {
		return &errkind.UsageError{Msg: fmt.Sprintf("--maybe-sent %q: want resend or leave", f.maybeSent)}
	}
	if f.concurrency < 1 {
		return &errkind.UsageError{Msg: fmt.Sprintf("--concurrency %d: want 1 or more calls in flight", f.concurrency)}
	}
	if f.syncBelow < 0 {
		return &errkind.UsageError{Msg: fmt.Sprintf("--sync-below %d: want a count of records (0: only below the provider's minimum)", f.syncBelow)}
	}
	if lease && f.lease <= 0 {
		return &errkind.UsageError{Msg: fmt.Sprintf("--lease %s: a sender must hold a shard for a positive time", f.lease)}
	}
	if lease && f.margin < 0 {
		return &errkind.UsageError{Msg: fmt.Sprintf("--takeover-margin %s: want a duration of 0 (none) or more", f.margin)}
	}
	return nil
}

// runSync is run's round for a job sent through the real-time API: send,
// wait while another sender holds a shard, then reconcile.
func (f *syncFlags) runSync(ctx context.Context, g *globals, drv *lifecycle.Driver, rt providers.RealTime, job lake.Digest, rf reconcileFlags, poll time.Duration, out string) (*reconcile.Report, error) {
	m, err := drv.Lake.GetManifest(ctx, job)
	if err != nil {
		return nil, err
	}
	prog, done := g.recordProgress("sync", m.ExpectedRecords)
	defer done()
	g.log.Info("sync: the retry child goes through the real-time API", "job", m.JobKey[:12], "provider", m.Provider, "records", m.ExpectedRecords)
	for {
		res, err := drv.SubmitSync(ctx, job, lifecycle.SyncOptions{RealTime: rt, Concurrency: f.concurrency, LeaveMaybeSent: f.maybeSent == "leave", Progress: prog})
		if err != nil {
			return nil, err
		}
		logSync(g, res)
		if res.Cancelled {
			return nil, ctx.Err()
		}
		if !res.Pending {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
	return reconcileRound(ctx, g, drv, job, rf, out)
}

// syncRetryResult is retry's result with the sync tail's.
type syncRetryResult struct {
	*reconcile.RetryResult
	Mode string                `json:"mode"`
	Sync *lifecycle.SyncResult `json:"sync,omitempty"`
	Next string                `json:"next,omitempty"`
}

// wantSync decides whether a planned child is sent through the real-time API.
func (f *syncFlags) wantSync(m *lake.Manifest) (bool, error) {
	switch f.mode {
	case "batch":
		return false, nil
	case "sync":
		if !hasRealTime(m) {
			if m.Provider == "bedrock" {
				return false, &errkind.UsageError{Msg: fmt.Sprintf("--mode sync: the job's Bedrock records are %s requests and the real-time client sends InvokeModel bodies only: use --mode batch", m.Endpoint)}
			}
			return false, &errkind.UsageError{Msg: fmt.Sprintf("--mode sync: provider %s has no real-time client in this batchlake (have openai, anthropic, bedrock (InvokeModel), gemini and sim): use --mode batch", m.Provider)}
		}
		return true, nil
	case "auto":
		if !hasRealTime(m) {
			return false, nil
		}
		return m.Held != "" || (f.syncBelow > 0 && m.ExpectedRecords < f.syncBelow), nil
	}
	return false, &errkind.UsageError{Msg: fmt.Sprintf("--mode %q: want batch, sync or auto", f.mode)}
}

// hasRealTime tells whether a job's records can go through its provider's
// real-time API: Bedrock's InvokeModel records can, its Converse records
// cannot (the client sends bodies as they are, to InvokeModel).
func hasRealTime(m *lake.Manifest) bool {
	switch m.Provider {
	case "openai", "anthropic", "gemini", ingest.SimProvider:
		return true
	case "bedrock":
		return m.Endpoint == "" || m.Endpoint == ingest.BedrockInvokeModel
	}
	return false
}

// realTimeFor makes the real-time client of a job's provider (for sim, the
// simulator's, in-process on loopback); close ends it.
func (f *syncFlags) realTimeFor(g *globals, l *lake.Lake, m *lake.Manifest) (rt providers.RealTime, close func(), err error) {
	close = func() {}
	switch provider := m.Provider; provider {
	case "openai":
		rt, err = openaibatch.NewRealTime(openaibatch.Config{})
	case "anthropic":
		rt, err = anthropicbatch.NewRealTime(anthropicbatch.Config{})
	case "gemini":
		rt, err = geminibatch.NewRealTime(geminibatch.Config{}, m.Model)
	case "bedrock":
		// The runtime (bedrock-runtime.<region>) is another endpoint than
		// the control plane --bedrock-endpoint overrides.
		rt, err = bedrockbatch.NewRealTime(context.Background(), bedrockbatch.Config{Region: os.Getenv("BATCHLAKE_BEDROCK_REGION"),
			Endpoint: os.Getenv("BATCHLAKE_BEDROCK_RUNTIME_ENDPOINT")}, m.Model, m.Endpoint)
	case ingest.SimProvider:
		sm, serr := sim.Start(l, sim.Options{Seed: f.simSeed, Logger: g.log})
		if serr != nil {
			return nil, close, serr
		}
		close = func() { sm.Close() }
		rt, err = sm.RealTime()
	default:
		err = fmt.Errorf("provider %s has no real-time client", m.Provider)
	}
	if err != nil {
		close()
		return nil, func() {}, &errkind.UsageError{Msg: "--mode sync: " + err.Error()}
	}
	return rt, close, nil
}

// sendSync sends a planned job through the provider's real-time API (its
// flags checked by check).
func (f *syncFlags) sendSync(ctx context.Context, g *globals, l *lake.Lake, m *lake.Manifest) (*lifecycle.SyncResult, error) {
	rt, closeRT, err := f.realTimeFor(g, l, m)
	if err != nil {
		return nil, err
	}
	defer closeRT()
	job, err := lake.ParseDigest(m.JobKey)
	if err != nil {
		return nil, err
	}
	drv := &lifecycle.Driver{Lake: l, Ledger: lake.NewLedger(l, ""), Target: m.Provider, Lease: f.lease, TmpDir: g.tmpDir}
	drv.Ledger.TakeoverMargin = f.margin
	prog, done := g.recordProgress("sync", m.ExpectedRecords)
	defer done()
	g.log.Info("sync: sending the job's records through the real-time API", "job", m.JobKey[:12], "provider", m.Provider, "records", m.ExpectedRecords, "concurrency", f.concurrency)
	return drv.SubmitSync(ctx, job, lifecycle.SyncOptions{RealTime: rt, Concurrency: f.concurrency, LeaveMaybeSent: f.maybeSent == "leave", Progress: prog})
}

// retrySync runs after retry planned its child: it sends the child through
// the real-time API when the flags say so, and returns what retry prints
// and the exit it ends with (nil: 0).
func (f *syncFlags) retrySync(ctx context.Context, g *globals, l *lake.Lake, res *reconcile.RetryResult) (any, error) {
	out := &syncRetryResult{RetryResult: res, Mode: lifecycle.ModeBatch}
	if res.Child == nil {
		return out, nil
	}
	m, err := l.GetManifest(ctx, mustJob(res.Child.JobKey))
	if err != nil {
		return nil, err
	}
	sync, err := f.wantSync(m)
	if err != nil || !sync {
		return out, err
	}
	out.Mode = lifecycle.ModeSync
	if out.Sync, err = f.sendSync(ctx, g, l, m); err != nil {
		return nil, err
	}
	logSync(g, out.Sync)
	out.Next = fmt.Sprintf("batchlake reconcile --lake %s --job %s", g.lakeURL, m.JobKey)
	res.Message += fmt.Sprintf("; sent through the %s real-time API", m.Provider)
	switch {
	case out.Sync.Pending:
		return out, exitErr{exitTempFail}
	case out.Sync.Cancelled:
		return out, exitErr{exitPartial}
	}
	return out, nil
}

func logSync(g *globals, r *lifecycle.SyncResult) {
	for _, s := range r.Shards {
		g.log.Info("sync: "+s.Action, "shard", s.ShardID, "records", s.Records, "answered", s.Answered, "calls", s.Calls,
			"maybe_sent", s.MaybeSent, "resent", s.Resent, "unfinished", s.Unfinished)
		if s.Detail != "" {
			g.log.Warn("sync: "+s.Detail, "shard", s.ShardID)
		}
		if s.MaybeSent > 0 {
			g.log.Warn("sync: calls may have reached the provider without an answer: each is a maybe_sent line, and a record sent again is a counted duplicate submission",
				"shard", s.ShardID, "maybe_sent", s.MaybeSent, "resent", s.Resent)
		}
	}
}

// recordProgress reports the records finished of total: a bar on stderr
// when it is a terminal (or --progress always), a log line every 10 s
// otherwise (or nothing with --progress never).
func (g *globals) recordProgress(step string, total int64) (func(done, total int64), func()) {
	if g.progress == "never" || total <= 0 {
		return nil, func() {}
	}
	tty := false
	if f, ok := g.stderr.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	var mu sync.Mutex
	if g.progress == "always" || tty {
		bar := progressbar.NewOptions64(total, progressbar.OptionSetWriter(g.stderr), progressbar.OptionSetDescription(step+" records"),
			progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
		return func(done, _ int64) { mu.Lock(); bar.Set64(done); mu.Unlock() }, func() { bar.Finish() }
	}
	last := time.Now()
	return func(done, total int64) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) < progressLogEvery && done < total {
			return
		}
		last = time.Now()
		g.log.Info(step+" progress", "records", done, "of", total)
	}, func() {}
}

// round is one round of run: a retry child that wantSync picks goes through
// the real-time API (rt, or the provider's own real-time client if nil),
// anything else as a batch (runRound).
func (f *syncFlags) round(ctx context.Context, g *globals, drv *lifecycle.Driver, rt providers.RealTime, job lake.Digest, rf reconcileFlags, poll time.Duration, out string) (*reconcile.Report, error) {
	m, err := drv.Lake.GetManifest(ctx, job)
	if err != nil {
		return nil, err
	}
	sync := false
	if m.ParentJobKey != "" {
		if sync, err = f.wantSync(m); err != nil {
			return nil, err
		}
	}
	if !sync {
		return runRound(ctx, g, drv, job, rf, poll, out)
	}
	if rt == nil {
		r, closeRT, err := f.realTimeFor(g, drv.Lake, m)
		if err != nil {
			return nil, err
		}
		defer closeRT()
		rt = r
	}
	return f.runSync(ctx, g, drv, rt, job, rf, poll, out)
}
