package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/batchlake/batchlake/internal/sim"
	"github.com/batchlake/batchlake/lake"
)

// TestOneSimulatorAcrossProcesses: the simulator keeps its batches in the
// lake, so a job submitted through one (run's, which loses a create
// answer) is polled and collected through another, as the step commands do,
// each in a process of its own. The lost create is found, not made twice.
func TestOneSimulatorAcrossProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, dir := openLake(t)
	m := planJob(t, l, dir, "sim", 3)
	job := mustDigest(t, m.JobKey)

	first, err := sim.Start(l, sim.Options{Seed: 5, LostCreates: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := &Driver{Lake: l, Ledger: lake.NewLedger(l, "first"), Client: first, Target: "sim", Lease: time.Minute, TmpDir: dir}
	res, err := d.Submit(ctx, job)
	if err != nil || res.Pending {
		t.Fatalf("submit: %+v, %v", res, err)
	}
	actions := map[string]int{}
	for _, s := range res.Shards {
		actions[s.Action]++
	}
	if actions["found"] != 1 || actions["created"] != 2 {
		t.Errorf("submit actions %v, want the lost create found and two created", actions)
	}
	if n := first.Server().CountRequests("POST", "/v1/batches"); n != 3 {
		t.Errorf("%d creates for 3 shards, want 3", n)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	second := startSim(t, l)
	d2 := &Driver{Lake: l, Ledger: lake.NewLedger(l, "second"), Client: second, Target: "sim", Lease: time.Minute, TmpDir: dir}
	for poll := 1; ; poll++ {
		res, err := d2.Status(ctx, job)
		if err != nil {
			t.Fatalf("status through another simulator: %v", err)
		}
		if !res.Pending {
			break
		}
		if poll == 5 {
			t.Fatalf("still pending after %d polls: %+v", poll, res)
		}
	}
	res, err = d2.Collect(ctx, job)
	if err != nil || res.Pending {
		t.Fatalf("collect through another simulator: %+v, %v", res, err)
	}
	bound := map[string]bool{}
	for _, s := range res.Shards {
		if s.Action != "collected" || s.ProviderStatus != "completed" || bound[s.ProviderJobID] {
			t.Errorf("shard %s: %s, batch %s %s; want each shard's own batch completed and collected", s.ShardID, s.Action, s.ProviderJobID, s.ProviderStatus)
		}
		bound[s.ProviderJobID] = true
	}
	if len(res.Shards) != len(m.Shards) {
		t.Errorf("collect answered for %d shards, want %d", len(res.Shards), len(m.Shards))
	}
	if n := second.Server().CountRequests("POST", "/v1/batches"); n != 0 {
		t.Errorf("the second simulator was asked to create %d batches, want none", n)
	}
}
