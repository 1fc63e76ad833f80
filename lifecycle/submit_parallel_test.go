package lifecycle

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchlake/batchlake/internal/sim"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/providers"
)

// overlapUpload is a provider whose Upload calls are watched, and whose
// Create fails for the file of one shard (by its upload's name); the
// uploads of the shards after it (held) wait until that create has failed.
type overlapUpload struct {
	providers.Client
	upload  overlap
	mu      sync.Mutex
	files   map[string]string // file id → upload name
	failing string            // upload name whose create fails
	held    map[string]bool   // upload names that wait for the failure
	failed  chan struct{}     // closed when the failing create has failed
}

func (o *overlapUpload) Upload(ctx context.Context, name string, r io.Reader, size int64) (string, error) {
	defer o.upload.hold()()
	if o.held[name] {
		select {
		case <-o.failed:
		case <-time.After(5 * time.Second):
		}
	}
	id, err := o.Client.Upload(ctx, name, r, size)
	o.mu.Lock()
	o.files[id] = name
	o.mu.Unlock()
	return id, err
}

func (o *overlapUpload) Create(ctx context.Context, fileID, endpoint string, meta map[string]string) (*providers.Batch, error) {
	o.mu.Lock()
	name := o.files[fileID]
	o.mu.Unlock()
	if o.failing != "" && name == o.failing {
		close(o.failed)
		return nil, errors.New("400 invalid_request_error: refused")
	}
	return o.Client.Create(ctx, fileID, endpoint, meta)
}

// TestSubmitParallel: with Parallel, submit works on that many shards at a
// time (their uploads overlap), binds each shard to exactly one batch, also
// when create answers are lost, and reports the shards in the manifest's
// order. A shard that fails lets the others finish and starts no more; the
// next submit binds the rest.
func TestSubmitParallel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n, parallel := 12, 4
	d, job, m := plannedSimJob(t, n, sim.Options{Seed: 1, LostCreates: 3})
	simc := d.Client.(*sim.Simulator)
	name := func(i int) string { return "batchlake-" + m.Shards[i].Object.Hex() + ".jsonl" }
	ou := &overlapUpload{Client: d.Client, files: map[string]string{}, failing: name(6), held: map[string]bool{}, failed: make(chan struct{})}
	for i := 7; i < n; i++ {
		ou.held[name(i)] = true
	}
	d.Client, d.Parallel = ou, parallel
	_, err := d.Submit(ctx, job)
	if err == nil || !strings.Contains(err.Error(), m.Shards[6].ShardID) {
		t.Fatalf("submit with shard %s's create refused: %v, want that shard's error", m.Shards[6].ShardID, err)
	}
	if ou.upload.most < 2 || ou.upload.most > parallel {
		t.Errorf("at most %d uploads at once, want between 2 and %d", ou.upload.most, parallel)
	}
	// Started before the failure (at most up to shard 6+parallel-1, whose
	// uploads waited for it): bound; after it, none started.
	for i, s := range m.Shards {
		last, err := d.Ledger.Last(ctx, job, s.ShardID)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case i < 6 && last.State != lake.Submitted:
			t.Errorf("shard %d (%s) is %s, want SUBMITTED: finished before shard 6 started", i, s.ShardID, last.State)
		case i >= 6+parallel && last.State != lake.Validated:
			t.Errorf("shard %d (%s) is %s after the failure of shard 6, want VALIDATED: not started", i, s.ShardID, last.State)
		case i > 6 && last.State != lake.Submitted && last.State != lake.Validated:
			t.Errorf("shard %d (%s) is %s, want SUBMITTED (started before the failure) or VALIDATED", i, s.ShardID, last.State)
		}
	}
	ou.failing = ""
	res, err := d.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	perShard := map[string]int{}
	for _, b := range simc.Server().Batches() {
		perShard[b.Metadata[providers.MetaShardID]]++
	}
	for i, s := range res.Shards {
		last, err := d.Ledger.Last(ctx, job, s.ShardID)
		if err != nil {
			t.Fatal(err)
		}
		if s.ShardID != m.Shards[i].ShardID || last.State != lake.Submitted || perShard[s.ShardID] != 1 || last.ProviderJobID == "" {
			t.Errorf("shard %d: reported %+v, ledger %s %s, %d batches at the provider; want %s bound to its one batch",
				i, s, last.State, last.ProviderJobID, perShard[s.ShardID], m.Shards[i].ShardID)
		}
	}
	if len(res.Shards) != n || res.Pending {
		t.Errorf("%d shards reported, pending %v; want %d, none pending", len(res.Shards), res.Pending, n)
	}
}
