package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/providers"
)

// submittedSimJob plans a job of n records, one a shard, for the simulator
// and submits it.
func submittedSimJob(t *testing.T, n int) (*Driver, lake.Digest, *lake.Manifest) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	l, err := lake.Open(ctx, filepath.Join(dir, "lake"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var lines []string
	for i := range n {
		lines = append(lines, fmt.Sprintf(`{"custom_id":"r%d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"q%d"}]}}`, i, i))
	}
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plan, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: "sim", Input: in, Tenant: "acme", PromptVersion: "p1",
		ShardMaxRecords: 1, TmpDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	job, err := lake.ParseDigest(plan.JobKey)
	if err != nil {
		t.Fatal(err)
	}
	d := &Driver{Lake: l, Ledger: lake.NewLedger(l, "test"), Client: startSim(t, l), Target: "sim", Lease: time.Minute, TmpDir: dir}
	if _, err := d.Submit(ctx, job); err != nil {
		t.Fatal(err)
	}
	m, err := l.GetManifest(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Shards) != n {
		t.Fatalf("%d shards, want %d", len(m.Shards), n)
	}
	return d, job, m
}

// failingGet is a provider whose Get fails for one batch, as a provider
// answering 5xx for it after the client's own retries.
type failingGet struct {
	providers.Client
	id string
}

func (f failingGet) Get(ctx context.Context, id string) (*providers.Batch, error) {
	if id == f.id {
		return nil, errors.New("503 Service Unavailable")
	}
	return f.Client.Get(ctx, id)
}

// TestStatusPollsEveryShard: one shard whose batch cannot be polled fails the
// step (exit 1, retry it), but only after every other shard's change is
// recorded in the ledger.
func TestStatusPollsEveryShard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, job, m := submittedSimJob(t, 3)
	simc := d.Client
	events := func() map[string]int {
		n := map[string]int{}
		for _, s := range m.Shards {
			last, err := d.Ledger.Last(ctx, job, s.ShardID)
			if err != nil {
				t.Fatal(err)
			}
			n[s.ShardID] = last.Seq
		}
		return n
	}
	bad, err := d.Ledger.Last(ctx, job, m.Shards[0].ShardID)
	if err != nil {
		t.Fatal(err)
	}
	before := events()
	d.Client = failingGet{Client: simc, id: bad.ProviderJobID}
	res, err := d.Status(ctx, job)
	if err == nil {
		t.Fatalf("status = %+v with one batch that cannot be polled; want an error", res)
	}
	for _, want := range []string{m.Shards[0].ShardID, bad.ProviderJobID, "503", "1 of 3 shards"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	after := events()
	for _, s := range m.Shards {
		polled := after[s.ShardID] > before[s.ShardID]
		if want := s.ShardID != m.Shards[0].ShardID; polled != want {
			t.Errorf("shard %s: change recorded %v, want %v (ledger seq %d -> %d)", s.ShardID, polled, want, before[s.ShardID], after[s.ShardID])
		}
	}

	// The next run, with the provider answering again, polls the shard left.
	d.Client = simc
	if _, err := d.Status(ctx, job); err != nil {
		t.Fatal(err)
	}
	if last := events(); last[m.Shards[0].ShardID] == after[m.Shards[0].ShardID] {
		t.Errorf("shard %s not polled once the provider answered", m.Shards[0].ShardID)
	}
}

// overlapGet is a provider whose Get waits, up to a quarter of a second,
// for a second Get to be in flight, and counts the most in flight at once:
// a provider's round trip is tens to hundreds of milliseconds.
type overlapGet struct {
	providers.Client
	mu             sync.Mutex
	inFlight, most int
	gets           int
}

func (o *overlapGet) Get(ctx context.Context, id string) (*providers.Batch, error) {
	o.mu.Lock()
	o.inFlight++
	o.gets++
	o.most = max(o.most, o.inFlight)
	o.mu.Unlock()
	for deadline := time.Now().Add(250 * time.Millisecond); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		o.mu.Lock()
		n := o.inFlight
		o.mu.Unlock()
		if n > 1 {
			break
		}
	}
	defer func() { o.mu.Lock(); o.inFlight--; o.mu.Unlock() }()
	return o.Client.Get(ctx, id)
}

// TestStatusPollsShardsSideBySide: status polls the shards' batches side by
// side, up to lake.ShardFanout at a time, and reports them in the
// manifest's order, each change recorded.
func TestStatusPollsShardsSideBySide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := lake.ShardFanout + 4
	d, job, m := submittedSimJob(t, n)
	og := &overlapGet{Client: d.Client}
	d.Client = og
	res, err := d.Status(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if og.gets != n || og.most < 2 || og.most > lake.ShardFanout {
		t.Errorf("%d batches polled, at most %d at once; want %d, between 2 and %d at once", og.gets, og.most, n, lake.ShardFanout)
	}
	if len(res.Shards) != n {
		t.Fatalf("%d shards reported, want %d", len(res.Shards), n)
	}
	for i, s := range res.Shards {
		last, err := d.Ledger.Last(ctx, job, s.ShardID)
		if err != nil {
			t.Fatal(err)
		}
		if s.ShardID != m.Shards[i].ShardID || s.Action != "recorded" || last.State != lake.Running || last.Detail[lake.DetailProviderStatus] != s.ProviderStatus {
			t.Errorf("shard %d reported %+v, ledger %s %q; want %s recorded as RUNNING", i, s, last.State, last.Detail[lake.DetailProviderStatus], m.Shards[i].ShardID)
		}
	}
	if !res.Pending {
		t.Error("not pending with every batch running")
	}
}
