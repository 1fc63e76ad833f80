// Package lakegen grows a lake of many small jobs, each made the way
// `batchlake run --provider sim` makes one, but in-process: plan, submit to
// the fake OpenAI server over loopback through the real adapter, poll status,
// collect, reconcile and retry until the job settles. Running the binary per
// job costs a process start and a DuckDB instance per step; in-process a
// small job costs its reconcile (a DuckDB instance and its statements, about
// 0.15 cpu s) and little else, whatever the lake's size.
//
// The lake is real: every marker, table file and ledger event is what the
// commands write, and `batchlake verify` passes on it.
package lakegen

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/sim"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lifecycle"
	"github.com/batchlake/batchlake/reconcile"
)

// Options say what jobs to make.
type Options struct {
	// Records per job (default 5).
	Records int
	// Tenants the jobs are spread over, round robin (default 10).
	Tenants int
	// Seed drives the simulator's faults.
	Seed uint64
	// MaxRounds bounds the retry generations of one job (default 3).
	MaxRounds int
	// SameVersions plans every job with one prompt version and no source
	// version, as a daily pipeline that passes neither a new prompt version
	// nor --source-version does: the jobs of a tenant are told apart only by
	// their business keys (each job's are its own).
	SameVersions bool
	// TmpDir holds the inputs and the steps' temporary files.
	TmpDir string
	// Log receives the steps' logs (discarded if nil).
	Log *slog.Logger
}

// Generator makes jobs numbered from..to in one lake.
type Generator struct {
	o Options
	l *lake.Lake
}

// New makes a generator for the lake l.
func New(l *lake.Lake, o Options) (*Generator, error) {
	if o.Records <= 0 {
		o.Records = 5
	}
	if o.Tenants <= 0 {
		o.Tenants = 10
	}
	if o.MaxRounds <= 0 {
		o.MaxRounds = 3
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.TmpDir == "" {
		o.TmpDir = os.TempDir()
	}
	return &Generator{o: o, l: l}, nil
}

// Close releases nothing today; it stays so callers need not change when
// the generator holds something again.
func (g *Generator) Close() {}

// Tenant is job i's tenant.
func (g *Generator) Tenant(i int) string { return fmt.Sprintf("tenant-%02d", i%g.o.Tenants) }

// Input writes job i's requests: Records chat requests whose text and
// prompt version depend on i, so every job has a job key of its own.
func (g *Generator) Input(i int) (string, error) {
	var b strings.Builder
	for r := 0; r < g.o.Records; r++ {
		fmt.Fprintf(&b, `{"custom_id":"job%07d-rec%03d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Classify the ticket."},{"role":"user","content":"Ticket %d of job %d: a subscription change."}],"max_tokens":120,"temperature":0}}`+"\n", i, r, r, i)
	}
	p := filepath.Join(g.o.TmpDir, fmt.Sprintf("lakegen-input-%d.jsonl", i))
	return p, os.WriteFile(p, []byte(b.String()), 0o644)
}

// Job makes job i: plan, then rounds of submit, status, collect, reconcile
// and retry until nothing is left to retry or MaxRounds is reached. It
// returns the job keys it made (the first attempt and its retry children).
//
// Each job has a simulator of its own, its state in memory: submit looks
// for an earlier batch of the job by listing the provider's batches, and
// one simulator for the whole lake would list every batch of every job made
// so far on each submit (quadratic in the lake's size). The job's markers,
// table files and ledger events are the lake's, as with one simulator.
func (g *Generator) Job(ctx context.Context, i int) ([]string, error) {
	in, err := g.Input(i)
	if err != nil {
		return nil, err
	}
	defer os.Remove(in)
	sm, err := sim.Start(g.l, sim.Options{Seed: g.o.Seed, Logger: g.o.Log, InMemory: true})
	if err != nil {
		return nil, fmt.Errorf("lakegen job %d: start the simulator: %w", i, err)
	}
	defer sm.Close()
	drv := &lifecycle.Driver{Lake: g.l, Ledger: lake.NewLedger(g.l, ""), Client: sm, Target: ingest.SimProvider, Lease: 10 * time.Minute, TmpDir: g.o.TmpDir}
	prompt, source := fmt.Sprintf("v%d", i/g.o.Tenants%7+1), fmt.Sprintf("job-%d", i)
	if g.o.SameVersions {
		prompt, source = "v1", ""
	}
	plan, err := ingest.Plan(ctx, g.l, ingest.PlanOptions{Provider: ingest.SimProvider, Input: in, Tenant: g.Tenant(i),
		PromptVersion: prompt, SourceVersion: source, TmpDir: g.o.TmpDir})
	if err != nil {
		return nil, fmt.Errorf("lakegen job %d: plan: %w", i, err)
	}
	keys := []string{plan.JobKey}
	job := plan.JobKey
	for round := 1; ; round++ {
		d, err := lake.ParseDigest(job)
		if err != nil {
			return keys, err
		}
		rep, err := g.round(ctx, drv, d)
		if err != nil {
			return keys, fmt.Errorf("lakegen job %d (%s) round %d: %w", i, job[:12], round, err)
		}
		if rep.RetryRecords == 0 || round >= g.o.MaxRounds {
			return keys, nil
		}
		rr, err := reconcile.RetryWith(ctx, g.l, d, reconcile.RetryOptions{TmpDir: g.o.TmpDir})
		if err != nil {
			return keys, fmt.Errorf("lakegen job %d: retry: %w", i, err)
		}
		if rr.Child == nil {
			return keys, nil
		}
		job = rr.Child.JobKey
		keys = append(keys, job)
	}
}

// round submits, waits (the fake server moves a batch one status per poll,
// so there is nothing to sleep for), collects and reconciles one job.
func (g *Generator) round(ctx context.Context, drv *lifecycle.Driver, job lake.Digest) (*reconcile.Report, error) {
	for _, step := range []struct {
		name string
		f    func(context.Context, lake.Digest) (*lifecycle.Result, error)
	}{{"submit", drv.Submit}, {"status", drv.Status}} {
		for n := 0; ; n++ {
			res, err := step.f(ctx, job)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", step.name, err)
			}
			if !res.Pending {
				break
			}
			if n > 100 {
				return nil, fmt.Errorf("%s: still pending after %d calls", step.name, n)
			}
		}
	}
	if _, err := drv.Collect(ctx, job); err != nil {
		return nil, fmt.Errorf("collect: %w", err)
	}
	rep, err := reconcile.Run(ctx, g.l, reconcile.Options{JobKey: job.Hex(), TmpDir: g.o.TmpDir,
		Engine: reconcile.EngineOptions{Threads: 1, MemoryLimit: "256MB", TempDir: g.o.TmpDir}})
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	return rep, nil
}
