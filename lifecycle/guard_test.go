package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/fakeopenai"
	"github.com/batchlake/batchlake/internal/sim"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/providers/openaibatch"
)

// planJob plans n OpenAI-format records for provider, one shard per record.
func planJob(t *testing.T, l *lake.Lake, dir, provider string, n int) *lake.Manifest {
	t.Helper()
	var lines []string
	for i := range n {
		lines = append(lines, fmt.Sprintf(`{"custom_id":"r%d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"q%d"}]}}`, i, i))
	}
	in := filepath.Join(dir, provider+"-in.jsonl")
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	plan, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: provider, Input: in, Tenant: "acme", PromptVersion: "p1", ShardMaxRecords: 1, TmpDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	m, err := l.GetManifest(ctx, mustDigest(t, plan.JobKey))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustDigest(t *testing.T, hex string) lake.Digest {
	t.Helper()
	d, err := lake.ParseDigest(hex)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func openLake(t *testing.T) (*lake.Lake, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := lake.Open(context.Background(), filepath.Join(dir, "lake"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, dir
}

// startSim starts the simulator over l for the test.
func startSim(t *testing.T, l *lake.Lake) *sim.Simulator {
	t.Helper()
	s, err := sim.Start(l, sim.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// TestSimulatorServesOnlySimJobs: the simulator refuses a job planned for
// OpenAI, whether the driver says it talks to sim (the driver's check) or a
// driver mislabelled openai hands it the job (the simulator's own check);
// nothing is bound. A job planned with --provider sim is served.
func TestSimulatorServesOnlySimJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, dir := openLake(t)
	real := planJob(t, l, dir, "openai", 2)
	simJob := planJob(t, l, dir, "sim", 2)
	if simJob.Provider != "sim" || real.Provider != "openai" {
		t.Fatalf("manifests say %q and %q, want sim and openai", simJob.Provider, real.Provider)
	}
	if simJob.JobKey == real.JobKey {
		t.Fatalf("the same records planned for sim and for openai share the job key %s", real.JobKey)
	}
	for _, target := range []string{"sim", "openai"} {
		t.Run("driver says "+target, func(t *testing.T) {
			d := &Driver{Lake: l, Ledger: lake.NewLedger(l, "test"), Client: startSim(t, l), Target: target, Lease: time.Minute, TmpDir: dir}
			res, err := d.Submit(ctx, mustDigest(t, real.JobKey))
			if !errors.Is(err, errkind.ErrBadInput) {
				t.Fatalf("submit of an openai job through the simulator: %+v, %v; want a usage error", res, err)
			}
			if !strings.Contains(err.Error(), "openai") || !strings.Contains(err.Error(), "sim") {
				t.Errorf("error %q does not name both providers", err)
			}
			for _, s := range real.Shards {
				last, err := d.Ledger.Last(ctx, mustDigest(t, real.JobKey), s.ShardID)
				if err != nil {
					t.Fatal(err)
				}
				if last.ProviderJobID != "" || last.State == lake.Submitted {
					t.Errorf("shard %s bound to %q (%s)", s.ShardID, last.ProviderJobID, last.State)
				}
			}
		})
	}
	d := &Driver{Lake: l, Ledger: lake.NewLedger(l, "test"), Client: startSim(t, l), Target: "sim", Lease: time.Minute, TmpDir: dir}
	res, err := d.Submit(ctx, mustDigest(t, simJob.JobKey))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Shards {
		if s.Action != "created" || !strings.HasPrefix(s.ProviderJobID, "batch_sim_") {
			t.Errorf("sim job shard %s: %s %q, want created at the simulator", s.ShardID, s.Action, s.ProviderJobID)
		}
	}
}

// TestWrongKindBinding: an OpenAI job whose shard a simulator bound (as
// older versions did when submit defaulted to sim) is not "already bound":
// submit and collect refuse with the way out, cancel closes the shard
// without calling any provider, and status then leaves it alone.
func TestWrongKindBinding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, dir := openLake(t)
	m := planJob(t, l, dir, "openai", 2)
	job := mustDigest(t, m.JobKey)
	g := lake.NewLedger(l, "old-binary")
	bad := m.Shards[0].ShardID
	if _, err := g.Transition(ctx, job, bad, lake.Submitting, time.Minute, "", map[string]string{"target": "sim"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Transition(ctx, job, bad, lake.Submitted, 0, "batch_sim_0123", map[string]string{"target": "sim", "provider_status": "validating"}); err != nil {
		t.Fatal(err)
	}
	srv := fakeopenai.New(fakeopenai.Options{Seed: 3})
	base, err := srv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := openaibatch.New(openaibatch.Config{APIKey: srv.APIKey(), BaseURL: base})
	if err != nil {
		t.Fatal(err)
	}
	d := &Driver{Lake: l, Ledger: lake.NewLedger(l, "test"), Client: c, Target: "openai", Lease: time.Minute, TmpDir: dir}

	for name, step := range map[string]func(context.Context, lake.Digest) (*Result, error){"submit": d.Submit, "collect": d.Collect, "status": d.Status} {
		res, err := step(ctx, job)
		if !errors.Is(err, errkind.ErrBadInput) {
			t.Fatalf("%s: %+v, %v; want a usage error about the simulated batch", name, res, err)
		}
		for _, want := range []string{bad, "batch_sim_0123", "sim", "batchlake cancel --job " + m.JobKey, "plan the records again"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not say %q", name, err, want)
			}
		}
	}
	if n := len(srv.Batches()); n != 0 {
		t.Errorf("the OpenAI server holds %d batches after the refused steps, want 0", n)
	}

	res, err := d.Cancel(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if a := res.Shards[0]; a.Action != "closed_wrong_provider" || a.State != lake.Cancelled {
		t.Errorf("cancel: shard %s %s %s, want closed_wrong_provider CANCELLED", a.ShardID, a.Action, a.State)
	}
	if _, err := d.Status(ctx, job); err != nil {
		t.Errorf("status after the wrong binding was closed: %v", err)
	}
	// Collect still never reads the simulated batch's results.
	if _, err := d.Collect(ctx, job); !errors.Is(err, errkind.ErrBadInput) {
		t.Errorf("collect after cancel: %v, want the usage error", err)
	}
}
