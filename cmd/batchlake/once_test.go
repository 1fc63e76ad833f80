package main

import (
	"context"
	"testing"
	"time"

	"github.com/batchlake/batchlake/providers/fakeopenai"
)

// TestSlowUploadOutlastsLease: submitter A's file upload takes 3 s, its
// lease 1 s. B tries the shard after A's lease (and the takeover margin)
// would have run out, while A still uploads: A's heartbeat renewed the
// lease, so B steps back (exit 75) and A creates the only batch.
func TestSlowUploadOutlastsLease(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeopenai.Options{Seed: 31, Faults: fakeopenai.Faults{UploadSlow: 1, UploadDelay: 3 * time.Second}})
	p := h.plan(3, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := lifecycleArgs("submit", p.JobKey, "--lease", "1s")
	slow, so, se := h.start(ctx, nil, args...)
	deadline := time.Now().Add(10 * time.Second)
	for h.srv.CountRequests("POST", "/v1/files") == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // A's first lease and the margin are over
	second := h.must([]int{exitTempFail}, args...)
	var s stepOut
	decode(t, second, &s)
	if a := actions(s)[p.Shards[0].ShardID]; a != "leased" {
		t.Errorf("second submitter during A's upload: %s, want leased", a)
	}
	first := h.wait(slow, so, se, args)
	if first.code != 0 {
		t.Fatalf("slow submitter: %s", first)
	}
	decode(t, first, &s)
	if a := actions(s)[p.Shards[0].ShardID]; a != "created" {
		t.Errorf("slow submitter: %s, want created", a)
	}
	if got := h.creates(); got != 1 {
		t.Errorf("%d creates for one shard", got)
	}
	h.assertOneBatchPerShard(p)
}

// TestLostCreateBoundAfterSettle: the create's answer is lost and the
// provider's listing shows the batch only 1.5 s later. The submitter looks
// it up itself for 300 ms (not long enough), releases the shard with a 2 s
// settle and exits 75; a retry inside the settle steps back; a retry after
// it binds the batch. Exactly one batch, bound in seconds, not a lease.
func TestLostCreateBoundAfterSettle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeopenai.Options{Seed: 37, ListDelay: 1500 * time.Millisecond, Faults: fakeopenai.Faults{CreateLost: 1}})
	p := h.plan(3, 3)
	env := []string{"BATCHLAKE_LOST_LOOKUP=300ms", "BATCHLAKE_SETTLE=2s"}
	args := lifecycleArgs("submit", p.JobKey, "--lease", "10m")
	shard := p.Shards[0].ShardID
	start := time.Now()
	var s stepOut
	first := h.runEnv(env, args...)
	decode(t, first, &s)
	if first.code != exitTempFail || actions(s)[shard] != "unknown" {
		t.Fatalf("first submit: want exit 75 unknown, got %s", first)
	}
	early := h.runEnv(env, args...)
	decode(t, early, &s)
	if early.code != exitTempFail || actions(s)[shard] != "leased" {
		t.Errorf("submit inside the settle: want exit 75 leased, got %s", early)
	}
	time.Sleep(time.Until(start.Add(2500 * time.Millisecond)))
	later := h.runEnv(env, args...)
	decode(t, later, &s)
	if later.code != 0 || actions(s)[shard] != "found" {
		t.Fatalf("submit after the settle: want exit 0 found, got %s", later)
	}
	if took := time.Since(start); took > 2*time.Minute {
		t.Errorf("bound after %s", took)
	}
	if got := h.creates(); got != 1 {
		t.Errorf("%d creates, want 1", got)
	}
	h.assertOneBatchPerShard(p)
}

// TestLostCreateFoundByTheSubmitter: the listing catches up while the
// submitter is still looking: it binds the batch in the same run (exit 0).
func TestLostCreateFoundByTheSubmitter(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeopenai.Options{Seed: 41, ListDelay: 500 * time.Millisecond, Faults: fakeopenai.Faults{CreateLost: 1}})
	p := h.plan(3, 3)
	r := h.runEnv([]string{"BATCHLAKE_LOST_LOOKUP=10s"}, lifecycleArgs("submit", p.JobKey, "--lease", "10m")...)
	var s stepOut
	decode(t, r, &s)
	if r.code != 0 || actions(s)[p.Shards[0].ShardID] != "found" {
		t.Fatalf("want exit 0 found, got %s", r)
	}
	if got := h.creates(); got != 1 {
		t.Errorf("%d creates, want 1", got)
	}
	h.assertOneBatchPerShard(p)
}
