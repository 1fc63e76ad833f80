package main

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/batchlake/batchlake/internal/fakeopenai"
	"github.com/batchlake/batchlake/providers"
	"github.com/batchlake/batchlake/providers/openaibatch"
)

// TestSlowUploadOutlastsLease: submitter A's file upload takes 3 s, its
// lease 1 s. B tries the shard after A's lease (and the takeover margin)
// would have run out, while A still uploads: A's heartbeat renewed the
// lease, so B steps back (exit 75) and A creates the only batch.
// On a submitter without the heartbeat, B took over and both created.
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
	second := h.must([]int{0, exitTempFail}, args...)
	first := h.wait(slow, so, se, args)
	var a, b stepOut
	decode(t, first, &a)
	decode(t, second, &b)
	// A's heartbeat keeps the shard: B steps back and A creates. (Were A
	// starved past its own lease, its upload would be cancelled and B would
	// create instead: still one batch.)
	got := actions(a)[p.Shards[0].ShardID] + "/" + actions(b)[p.Shards[0].ShardID]
	if got != "created/leased" && got != "lease_lost/created" {
		t.Errorf("A/B actions %s, want created/leased\nA: %s\nB: %s", got, first, second)
	}
	if got == "created/leased" && (first.code != 0 || second.code != exitTempFail) {
		t.Errorf("A exit %d, B exit %d, want 0 and 75", first.code, second.code)
	}
	if got := h.creates(); got != 1 {
		t.Errorf("%d creates for one shard", got)
	}
	h.assertOneBatchPerShard(p)
}

// TestLostCreateBoundAfterSettle: the create's answer is lost and the
// provider's listing shows the batch only 1.5 s later. The submitter looks
// it up itself for 300 ms (not long enough), releases the shard with a 3 s
// settle and exits 75; a retry inside the settle steps back; a retry after
// it binds the batch. Exactly one batch, bound in seconds, not a lease.
func TestLostCreateBoundAfterSettle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeopenai.Options{Seed: 37, ListDelay: 1500 * time.Millisecond, Faults: fakeopenai.Faults{CreateLost: 1}})
	p := h.plan(3, 3)
	env := []string{"BATCHLAKE_LOST_LOOKUP=300ms", "BATCHLAKE_SETTLE=3s"}
	args := lifecycleArgs("submit", p.JobKey, "--lease", "10m")
	shard := p.Shards[0].ShardID
	start := time.Now()
	var s stepOut
	first := h.runEnv(env, args...)
	decode(t, first, &s)
	if first.code != exitTempFail || actions(s)[shard] != "unknown" {
		t.Fatalf("first submit: want exit 75 unknown, got %s", first)
	}
	released := time.Now() // the release happened before the first run ended
	early := h.runEnv(env, args...)
	decode(t, early, &s)
	if early.code != exitTempFail || actions(s)[shard] != "leased" {
		t.Errorf("submit inside the settle: want exit 75 leased, got %s", early)
	}
	time.Sleep(time.Until(released.Add(3200 * time.Millisecond)))
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

// TestDuplicateBatchesThroughTheBinary: two batches for one shard exist
// before submit runs (made outside the protocol). submit binds the oldest
// and records the other; status shows it and cancels it; collect ingests
// what it finished; reconcile lists it and prices its lines as
// duplicate_submission.
func TestDuplicateBatchesThroughTheBinary(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeopenai.Options{Seed: 43, Rates: &fakeopenai.Rates{}})
	p := h.plan(3, 3)
	shard := p.Shards[0].ShardID
	c, err := openaibatch.New(openaibatch.Config{APIKey: h.key, BaseURL: h.url})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ids []string
	for range 2 {
		f, err := os.Open(h.writeInput(3))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		fileID, err := c.Upload(ctx, "outside.jsonl", f, st.Size())
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Create(ctx, fileID, "/v1/chat/completions", map[string]string{providers.MetaJobKey: p.JobKey, providers.MetaShardID: shard, providers.MetaAttempt: "1"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, b.ID)
	}
	var s stepOut
	decode(t, h.must([]int{0}, lifecycleArgs("submit", p.JobKey)...), &s)
	if s.Shards[0].Action != "found" || s.Shards[0].ProviderJobID != ids[0] {
		t.Fatalf("submit: %+v, want found %s (the oldest)", s.Shards[0], ids[0])
	}
	r := h.must([]int{exitTempFail}, lifecycleArgs("status", p.JobKey)...)
	var st struct {
		Shards []struct {
			Duplicates []struct {
				ID     string `json:"provider_job_id"`
				Action string `json:"action"`
				Why    string `json:"why"`
			} `json:"duplicate_batches"`
		} `json:"shards"`
	}
	decode(t, r, &st)
	if d := st.Shards[0].Duplicates; len(d) != 1 || d[0].ID != ids[1] || d[0].Action != "cancel_requested" || d[0].Why != "found_duplicate" {
		t.Fatalf("status: duplicate_batches %+v, want %s cancel_requested found_duplicate\n%s", d, ids[1], r)
	}
	h.statusUntilTerminal(p.JobKey)
	h.must([]int{0}, lifecycleArgs("collect", p.JobKey)...)
	rr := h.must([]int{exitReview}, "reconcile", "--job", p.JobKey)
	var rep struct {
		Duplicate  int64                  `json:"duplicate"`
		CostUSD    map[string]json.Number `json:"cost_usd"`
		Duplicates []struct {
			ShardID string `json:"shard_id"`
			ID      string `json:"provider_job_id"`
		} `json:"duplicate_batches"`
	}
	decode(t, rr, &rep)
	if len(rep.Duplicates) != 1 || rep.Duplicates[0].ID != ids[1] || rep.Duplicates[0].ShardID != shard {
		t.Errorf("report duplicate_batches %+v, want %s of %s", rep.Duplicates, ids[1], shard)
	}
	if cost, err := rep.CostUSD["duplicate_submission"].Float64(); rep.Duplicate == 0 || err != nil || cost <= 0 {
		t.Errorf("report: duplicate %d, duplicate_submission %q: the duplicate batch's lines are not counted", rep.Duplicate, rep.CostUSD["duplicate_submission"])
	}
	// The batch record beside the ledger is part of the lake's layout.
	if r := h.run("verify"); r.code != 0 {
		t.Errorf("verify: %s", r)
	}
}
