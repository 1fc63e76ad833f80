package lifecycle_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/fakeopenai"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lifecycle"
	"github.com/batchlake/batchlake/providers/openaibatch"
)

// TestMaxInFlight: against a provider that enforces an enqueued-token limit
// room for two of the job's batches, submitting every shard at once has
// batches fail validation (token_limit_exceeded), while --max-in-flight 2
// keeps at most two unfinished at the provider, leaves the other shards
// waiting (Pending: exit 75) and binds every shard with no batch failed.
func TestMaxInFlight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		maxInFlight int
		parallel    int
		wantFailed  bool
	}{
		{"no limit", 0, 1, true},
		{"two in flight", 2, 1, false},
		{"two in flight, four shards at a time", 2, 4, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			l, tmp := newLake(t)
			in := filepath.Join(tmp, "in.jsonl")
			if err := os.WriteFile(in, []byte(strings.Join(openaiLines(12), "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			plan, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: "openai", Input: in, Tenant: "acme", PromptVersion: "p1", ShardMaxRecords: 2, TmpDir: tmp})
			if err != nil {
				t.Fatal(err)
			}
			job, _ := lake.ParseDigest(plan.JobKey)
			m, err := l.GetManifest(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Shards) != 6 {
				t.Fatalf("%d shards, want 6", len(m.Shards))
			}
			var biggest int64
			for _, s := range m.Shards {
				biggest = max(biggest, s.Bytes)
			}
			// Two shards' prompt tokens fit; a third does not.
			srv := fakeopenai.New(fakeopenai.Options{EnqueuedTokenLimit: biggest / 4 * 5 / 2})
			url, err := srv.Start()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Close() })
			c, err := openaibatch.New(openaibatch.Config{APIKey: fakeopenai.DefaultAPIKey, BaseURL: url, CreateTimeout: 5 * time.Second, RequestTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			d := &lifecycle.Driver{Lake: l, Ledger: lake.NewLedger(l, "test"), Client: c, Target: "openai", Lease: time.Minute, TmpDir: tmp,
				LostLookup: -1, MaxInFlight: tc.maxInFlight, Parallel: tc.parallel}
			unfinished := func() int {
				n := 0
				for _, b := range srv.Batches() {
					switch b.Status {
					case "completed", "failed", "expired", "cancelled":
					default:
						n++
					}
				}
				return n
			}
			waited := false
			for round := 0; ; round++ {
				if round > 50 {
					t.Fatal("shards still not bound after 50 submit rounds")
				}
				res, err := d.Submit(ctx, job)
				if err != nil {
					t.Fatal(err)
				}
				if tc.maxInFlight > 0 && unfinished() > tc.maxInFlight {
					t.Fatalf("round %d: %d batches unfinished at the provider, --max-in-flight %d", round, unfinished(), tc.maxInFlight)
				}
				for _, s := range res.Shards {
					if s.Action == "waiting" {
						waited = true
						if !res.Pending || s.Detail == "" {
							t.Fatalf("waiting shard %+v in a result with Pending=%v", s, res.Pending)
						}
					}
				}
				if !res.Pending {
					break
				}
			}
			if waited != (tc.maxInFlight > 0) {
				t.Fatalf("a shard waited: %v, with --max-in-flight %d", waited, tc.maxInFlight)
			}
			// Let every batch finish, then count the failures.
			for i := 0; ; i++ {
				res, err := d.Status(ctx, job)
				if err != nil {
					t.Fatal(err)
				}
				if !res.Pending {
					break
				}
				if i > 20 {
					t.Fatal("batches still running after 20 polls")
				}
			}
			failed := 0
			for _, b := range srv.Batches() {
				if b.Status == "failed" {
					failed++
					if b.Errors == nil || len(b.Errors.Data) == 0 || b.Errors.Data[0].Code != "token_limit_exceeded" {
						t.Fatalf("batch %s failed with %+v, want token_limit_exceeded", b.ID, b.Errors)
					}
				}
			}
			if got := len(srv.Batches()); got != 6 {
				t.Fatalf("%d batches at the provider, want one per shard (6)", got)
			}
			if (failed > 0) != tc.wantFailed {
				t.Fatalf("%d batches failed validation; want failures: %v", failed, tc.wantFailed)
			}
		})
	}
}
