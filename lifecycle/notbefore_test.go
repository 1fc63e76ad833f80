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

// TestSubmitWaitsForNotBefore: a job whose manifest carries a not-before
// time (a retry child's window) is not submitted before it: submit answers
// pending with action not_before and the time, writes nothing and calls no
// provider; once the time has passed, submit binds it. The submitters' clock
// is the ledger's, moved past the window instead of waiting it out.
func TestSubmitWaitsForNotBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := fakeopenai.New(fakeopenai.Options{Seed: 1})
	url, err := srv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	l, tmp := newLake(t)
	in := filepath.Join(tmp, "in.jsonl")
	if err := os.WriteFile(in, []byte(strings.Join(openaiLines(3), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notBefore := time.Now().UTC().Add(time.Hour).Truncate(time.Second)
	res, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: "openai", Input: in, Tenant: "acme", PromptVersion: "p1", TmpDir: tmp, NotBefore: &notBefore})
	if err != nil {
		t.Fatal(err)
	}
	job, err := lake.ParseDigest(res.JobKey)
	if err != nil {
		t.Fatal(err)
	}
	// submit runs one submitter whose clock is ahead of the system's by skew.
	submit := func(actor string, skew time.Duration) *lifecycle.Result {
		t.Helper()
		g := lake.NewLedger(l, actor)
		g.Now = func() time.Time { return time.Now().UTC().Add(skew) }
		c, err := openaibatch.New(openaibatch.Config{APIKey: fakeopenai.DefaultAPIKey, BaseURL: url, CreateTimeout: 5 * time.Second, RequestTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		d := &lifecycle.Driver{Lake: l, Ledger: g, Client: c, Target: "openai", Lease: time.Minute, TmpDir: tmp, LostLookup: -1}
		r, err := d.Submit(ctx, job)
		if err != nil {
			t.Fatalf("submit (%s): %v", actor, err)
		}
		if len(r.Shards) != 1 {
			t.Fatalf("submit (%s): %d shards, want 1", actor, len(r.Shards))
		}
		return r
	}
	events := func() int {
		t.Helper()
		evs, err := lake.NewLedger(l, "reader").Events(ctx, job, res.Shards[0].ShardID)
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	before := events()
	early := submit("early", 59*time.Minute)
	if sh := early.Shards[0]; !early.Pending || sh.Action != "not_before" || !strings.Contains(sh.Detail, notBefore.Format(time.RFC3339)) {
		t.Errorf("submit a minute before the window ends: pending %v, %+v", early.Pending, sh)
	}
	if n := len(srv.Batches()); n != 0 {
		t.Errorf("submit before the window created %d batches", n)
	}
	if n := events(); n != before {
		t.Errorf("submit before the window wrote %d ledger events", n-before)
	}
	late := submit("late", time.Hour+time.Second)
	if sh := late.Shards[0]; late.Pending || sh.ProviderJobID == "" {
		t.Errorf("submit after the window: pending %v, %+v", late.Pending, sh)
	}
	if n := len(srv.Batches()); n != 1 {
		t.Errorf("submit after the window: the provider holds %d batches, want 1", n)
	}
}
