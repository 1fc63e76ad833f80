// Package lakegen grows a lake of many small jobs, each made the way
// `batchlake run --provider sim` makes one, but in-process: plan, submit to
// the fake OpenAI server over loopback through the real adapter, poll status,
// collect, reconcile and retry until the job settles. Running the binary per
// job costs a process start and a DuckDB instance per step; in-process a
// small job takes tens of milliseconds, so a lake of 10,000 jobs is minutes.
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
	// TmpDir holds the inputs and the steps' temporary files.
	TmpDir string
	// Log receives the steps' logs (discarded if nil).
	Log *slog.Logger
}

// Generator makes jobs numbered from..to in one lake.
type Generator struct {
	o   Options
	l   *lake.Lake
	sim *sim.Simulator
	drv *lifecycle.Driver
}

// New starts the simulator and the driver for the lake l.
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
	sm, err := sim.Start(l, sim.Options{Seed: o.Seed, Logger: o.Log})
	if err != nil {
		return nil, fmt.Errorf("lakegen: start the simulator: %w", err)
	}
	drv := &lifecycle.Driver{Lake: l, Ledger: lake.NewLedger(l, ""), Client: sm, Target: ingest.SimProvider, Lease: 10 * time.Minute, TmpDir: o.TmpDir}
	return &Generator{o: o, l: l, sim: sm, drv: drv}, nil
}

// Close stops the simulator.
func (g *Generator) Close() { g.sim.Close() }

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
func (g *Generator) Job(ctx context.Context, i int) ([]string, error) {
	in, err := g.Input(i)
	if err != nil {
		return nil, err
	}
	defer os.Remove(in)
	plan, err := ingest.Plan(ctx, g.l, ingest.PlanOptions{Provider: ingest.SimProvider, Input: in, Tenant: g.Tenant(i),
		PromptVersion: fmt.Sprintf("v%d", i/g.o.Tenants%7+1), SourceVersion: fmt.Sprintf("job-%d", i), TmpDir: g.o.TmpDir})
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
		rep, err := g.round(ctx, d)
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
func (g *Generator) round(ctx context.Context, job lake.Digest) (*reconcile.Report, error) {
	for _, step := range []struct {
		name string
		f    func(context.Context, lake.Digest) (*lifecycle.Result, error)
	}{{"submit", g.drv.Submit}, {"status", g.drv.Status}} {
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
	if _, err := g.drv.Collect(ctx, job); err != nil {
		return nil, fmt.Errorf("collect: %w", err)
	}
	rep, err := reconcile.Run(ctx, g.l, reconcile.Options{JobKey: job.Hex(), TmpDir: g.o.TmpDir,
		Engine: reconcile.EngineOptions{Threads: 1, MemoryLimit: "256MB", TempDir: g.o.TmpDir}})
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	return rep, nil
}
