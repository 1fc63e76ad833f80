package openaibatch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/fakeopenai"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lifecycle"
	"github.com/batchlake/batchlake/providers/openaibatch"
)

// A running batch's request_counts move (the Batch object's total,
// completed and failed: 0 of N at in_progress, all N by finalizing), and
// the adapter reports them as they are, poll by poll.
func TestRequestCountsMove(t *testing.T) {
	const seed, polls = 3, 4
	_, c := setup(t, fakeopenai.Options{Seed: seed, PollsPerStep: polls}, openaibatch.Config{})
	ctx := context.Background()
	data, ids := input(40)
	b, err := c.Create(ctx, upload(t, c, data), chat, meta("job-1", "shard-0", "1"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := fakeopenai.Simulate(data, seed, fakeopenai.DefaultRates)
	if err != nil {
		t.Fatal(err)
	}
	var running []int64 // completed+failed at each in_progress poll
	for !b.Terminal() {
		if b, err = c.Get(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
		switch b.Status {
		case "validating":
			if b.Completed+b.Failed != 0 {
				t.Fatalf("validating batch counts %d/%d/%d", b.Completed, b.Failed, b.Total)
			}
		case "in_progress":
			if b.Total != int64(len(ids)) {
				t.Fatalf("in_progress total %d, want %d", b.Total, len(ids))
			}
			running = append(running, b.Completed+b.Failed)
		case "finalizing", "completed":
			if b.Total != int64(len(ids)) || b.Completed != want.Completed || b.Failed != want.Failed {
				t.Fatalf("%s counts %d/%d/%d, want the final %d/%d/%d", b.Status, b.Completed, b.Failed, b.Total, want.Completed, want.Failed, len(ids))
			}
		}
	}
	if len(running) != polls || running[0] != 0 {
		t.Fatalf("in_progress done counts %v: want %d polls starting at 0", running, polls)
	}
	for i := 1; i < len(running); i++ {
		if running[i] <= running[i-1] || running[i] >= want.Completed+want.Failed {
			t.Fatalf("in_progress done counts %v: want them rising, short of the final %d", running, want.Completed+want.Failed)
		}
	}
}

// status records a running batch's moving counts without an event per
// poll: the counts of a state or status change, progress at most every
// ten minutes, and the final counts when the batch ends.
func TestStatusRecordsMovingCountsSparingly(t *testing.T) {
	t.Parallel()
	const polls = 6
	_, c := setup(t, fakeopenai.Options{Seed: 5, PollsPerStep: polls}, openaibatch.Config{})
	ctx := context.Background()
	dir := t.TempDir()
	l, err := lake.Open(ctx, filepath.Join(dir, "lake"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	data, _ := input(60)
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: "openai", Input: in, Tenant: "acme", PromptVersion: "p1", TmpDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	job, _ := lake.ParseDigest(p.JobKey)
	clk := newClock(time.Now().UTC())
	g := lake.NewLedger(l, "tester")
	g.Now = clk.Now
	d := &lifecycle.Driver{Lake: l, Ledger: g, Client: c, Target: "openai", Lease: time.Minute, TmpDir: dir}
	if _, err := d.Submit(ctx, job); err != nil {
		t.Fatal(err)
	}
	shard := p.Shards[0].ShardID
	countsOf := func() []string {
		evs, err := g.Events(ctx, job, shard)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range evs {
			if c := e.Detail["counts"]; c != "" {
				out = append(out, e.Detail["provider_status"]+" "+c)
			}
		}
		return out
	}
	step := func() bool {
		r, err := d.Status(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		return r.Pending
	}
	// validating (polls-1 polls), then in_progress: its first counts are recorded.
	for range polls + 1 {
		step()
	}
	base := len(countsOf())
	step()
	step() // counts moved twice, within ten minutes: nothing recorded
	if got := countsOf(); len(got) != base {
		t.Fatalf("in_progress counts recorded on every poll: %v", got)
	}
	clk.Set(clk.Now().Add(11 * time.Minute))
	step() // ten minutes on, the moved counts are recorded as progress
	if got := countsOf(); len(got) != base+1 || got[len(got)-1] == got[len(got)-2] {
		t.Fatalf("no progress event after ten minutes: %v", got)
	}
	for step() {
		clk.Set(clk.Now().Add(time.Second))
	}
	b, err := c.Get(ctx, mustBound(t, g, job, shard))
	if err != nil {
		t.Fatal(err)
	}
	got := countsOf()
	if last := got[len(got)-1]; last != "completed "+fmtCounts(b.Completed, b.Failed, b.Total) {
		t.Fatalf("last recorded %q, want the final counts %s", last, fmtCounts(b.Completed, b.Failed, b.Total))
	}
	if len(got) > base+4 { // + progress, finalizing, completed (and a moved in_progress)
		t.Fatalf("%d count events for one batch: %v", len(got), got)
	}
}

func mustBound(t *testing.T, g *lake.Ledger, job lake.Digest, shard string) string {
	t.Helper()
	last, err := g.Last(context.Background(), job, shard)
	if err != nil || last.ProviderJobID == "" {
		t.Fatalf("shard %s not bound: %v", shard, err)
	}
	return last.ProviderJobID
}

func fmtCounts(completed, failed, total int64) string {
	return fmt.Sprintf("%d/%d/%d", completed, failed, total)
}
