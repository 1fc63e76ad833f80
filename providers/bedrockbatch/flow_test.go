package bedrockbatch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/fakebedrock"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lifecycle"
	"github.com/batchlake/batchlake/providers/bedrockbatch"
)

// flow is a lake on the S3 server with a lifecycle driver for Bedrock
// whose staging defaults under the lake's bucket.
type flow struct {
	*env
	l      *lake.Lake
	dir    string
	client *bedrockbatch.Client
}

func newFlow(t *testing.T, opts fakebedrock.Options, maxAttempts int) *flow {
	t.Helper()
	e := newEnv(t, opts)
	ctx := context.Background()
	lakeURL := "s3://lake?" + e.query.Encode()
	l, err := lake.Open(ctx, lakeURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	in, out, ok := bedrockbatch.DefaultLocations(lakeURL)
	if !ok {
		t.Fatal("no default staging for an s3 lake")
	}
	cfg := e.config()
	cfg.Input, cfg.Output, cfg.MaxAttempts = in, out, maxAttempts
	cfg.Model = func(ctx context.Context, jobKey string) (string, error) {
		d, err := lake.ParseDigest(jobKey)
		if err != nil {
			return "", err
		}
		m, err := l.GetManifest(ctx, d)
		if err != nil {
			return "", err
		}
		return m.Model, nil
	}
	return &flow{env: e, l: l, dir: t.TempDir(), client: e.client(t, cfg)}
}

func (f *flow) driver() *lifecycle.Driver {
	return &lifecycle.Driver{Lake: f.l, Ledger: lake.NewLedger(f.l, ""), Client: f.client, Target: "bedrock", Lease: time.Minute, TmpDir: f.dir}
}

// plan writes a Bedrock InvokeModel input of n records and plans it.
func (f *flow) plan(t *testing.T, n, shardMax int) lake.Digest {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"recordId":"CALL%07d","modelInput":{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,"messages":[{"role":"user","content":[{"type":"text","text":"summarise call %d"}]}]}}`+"\n", i, i)
	}
	p := filepath.Join(f.dir, fmt.Sprintf("input-%d.jsonl", n))
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The shards are balanced to Bedrock's minimum; the small jobs of these
	// tests are allowed (their fake has no minimum).
	res, err := ingest.Plan(context.Background(), f.l, ingest.PlanOptions{Provider: "bedrock", Input: p, Tenant: "t1", PromptVersion: "p1",
		Model: model, ShardMaxRecords: shardMax, TmpDir: f.dir, MinRecords: ingest.BedrockMinRecords, BelowMin: ingest.BelowMinAllow})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := lake.ParseDigest(res.JobKey)
	return d
}

// TestSubmitProtocol: two submitters at once, and a submit whose create
// response was lost, each leave exactly one job per shard at the fake.
func TestSubmitProtocol(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("concurrent submitters", func(t *testing.T) {
		t.Parallel()
		f := newFlow(t, fakebedrock.Options{}, 0)
		job := f.plan(t, 40, 10)
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if _, err := f.driver().Submit(ctx, job); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		// Shards left leased by a racing submitter are bound by the next run.
		res, err := f.driver().Submit(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		checkOnePerShard(t, f, res)
	})
	t.Run("lost create response", func(t *testing.T) {
		t.Parallel()
		f := newFlow(t, fakebedrock.Options{Faults: fakebedrock.Faults{CreateLost: 1}}, 1)
		job := f.plan(t, 20, 10)
		d := f.driver()
		d.LostLookup = -1 // the next run looks it up, not this one
		first, err := d.Submit(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if first.Shards[0].Action != "unknown" || first.Shards[0].State != lake.Submitting || !first.Pending {
			t.Fatalf("first submit %+v, want shard 0 unknown and SUBMITTING", first.Shards[0])
		}
		// The same submitter's next run looks it up first and binds it.
		res, err := d.Submit(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if res.Shards[0].Action != "found" {
			t.Fatalf("second submit %+v, want shard 0 found", res.Shards[0])
		}
		checkOnePerShard(t, f, res)
	})
}

func checkOnePerShard(t *testing.T, f *flow, res *lifecycle.Result) {
	t.Helper()
	jobs := f.fake.Jobs()
	if len(jobs) != len(res.Shards) {
		t.Fatalf("the fake holds %d jobs for %d shards", len(jobs), len(res.Shards))
	}
	bound := map[string]bool{}
	for _, s := range res.Shards {
		if s.State != lake.Submitted || s.ProviderJobID == "" {
			t.Errorf("shard %+v not bound", s)
		}
		bound[s.ProviderJobID] = true
	}
	for _, j := range jobs {
		if !bound[j.JobArn] {
			t.Errorf("job %s (%s) is bound to no shard", j.JobArn, j.JobName)
		}
	}
}
