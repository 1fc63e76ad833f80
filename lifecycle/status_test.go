package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/sim"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/providers"
)

// submittedSimJob plans a job of n records, one a shard, for the simulator
// and submits it.
func submittedSimJob(t *testing.T, n int) (*Driver, lake.Digest, *lake.Manifest) {
	t.Helper()
	d, job, m := plannedSimJob(t, n, sim.Options{Seed: 1})
	if _, err := d.Submit(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	return d, job, m
}

// plannedSimJob plans a job of n records, one a shard, for a simulator
// started with o.
func plannedSimJob(t *testing.T, n int, o sim.Options) (*Driver, lake.Digest, *lake.Manifest) {
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
	simc, err := sim.Start(l, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { simc.Close() })
	d := &Driver{Lake: l, Ledger: lake.NewLedger(l, "test"), Client: simc, Target: "sim", Lease: time.Minute, TmpDir: dir, LostLookup: 5 * time.Second}
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

// overlap counts one kind of provider call: how many were made and the
// most in flight at once. Each call waits, up to a quarter of a second, for
// a second one to be in flight: a provider's round trip is tens to hundreds
// of milliseconds, and calls made one after another must be seen so.
type overlap struct {
	mu                    sync.Mutex
	calls, inFlight, most int
}

// hold counts a call in, waits for a second one (or a quarter of a
// second), and returns what counts it out.
func (k *overlap) hold() func() {
	k.mu.Lock()
	k.calls++
	k.inFlight++
	k.most = max(k.most, k.inFlight)
	k.mu.Unlock()
	for deadline := time.Now().Add(250 * time.Millisecond); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		k.mu.Lock()
		n := k.inFlight
		k.mu.Unlock()
		if n > 1 {
			break
		}
	}
	return func() { k.mu.Lock(); k.inFlight--; k.mu.Unlock() }
}

// fannedOut fails t unless k counted n calls (what they did), at least two
// and at most lake.ShardFanout of them at once.
func fannedOut(t *testing.T, what string, k *overlap, n int) {
	t.Helper()
	if k.calls != n || k.most < 2 || k.most > lake.ShardFanout {
		t.Errorf("%d %s, at most %d at once; want %d, between 2 and %d at once", k.calls, what, k.most, n, lake.ShardFanout)
	}
}

// overlapGet is a provider whose Get and Cancel calls are watched.
type overlapGet struct {
	providers.Client
	get, cancel overlap
}

func (o *overlapGet) Get(ctx context.Context, id string) (*providers.Batch, error) {
	defer o.get.hold()()
	return o.Client.Get(ctx, id)
}

func (o *overlapGet) Cancel(ctx context.Context, id string) (*providers.Batch, error) {
	defer o.cancel.hold()()
	return o.Client.Cancel(ctx, id)
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
	fannedOut(t, "batches polled", &og.get, n)
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

// overlapDownload is a provider whose Download calls are watched, and
// which fails the download of one file.
type overlapDownload struct {
	providers.Client
	download overlap
	failing  string
}

func (o *overlapDownload) Download(ctx context.Context, id string, w io.Writer) error {
	defer o.download.hold()()
	if id == o.failing {
		return errors.New("503 Service Unavailable")
	}
	return o.Client.Download(ctx, id, w)
}

// TestCollectDownloadsAhead: collect downloads the next files while it
// ingests one, at most collectAhead ahead, ingests every file once, and
// leaves no downloaded file behind, also when a download fails.
func TestCollectDownloadsAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := 8
	d, job, _ := submittedSimJob(t, n)
	for range 10 {
		res, err := d.Status(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Pending {
			break
		}
	}
	leftovers := func() []string {
		names, err := filepath.Glob(filepath.Join(d.TmpDir, "batchlake-collect-*"))
		if err != nil {
			t.Fatal(err)
		}
		return names
	}

	// The fifth shard's output cannot be downloaded: the four before it are
	// collected, the step fails, and no file is left in TmpDir.
	od := &overlapDownload{Client: d.Client}
	fifth, err := d.Ledger.Last(ctx, job, "part-00004")
	if err != nil {
		t.Fatal(err)
	}
	od.failing = fifth.Detail["output_file_id"]
	if od.failing == "" {
		t.Fatalf("shard part-00004 has no output file: %+v", fifth)
	}
	d.Client = od
	if res, err := d.Collect(ctx, job); err == nil || !strings.Contains(err.Error(), "part-00004") {
		t.Fatalf("collect = %+v, %v; want part-00004's download to fail it", res, err)
	}
	if left := leftovers(); len(left) > 0 {
		t.Errorf("files left behind after a failed collect: %v", left)
	}
	if od.download.most < 2 || od.download.most > collectAhead+1 {
		t.Errorf("at most %d downloads at once, want between 2 and %d", od.download.most, collectAhead+1)
	}
	recs, err := d.Lake.IngestRecords(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	collected := map[string]bool{}
	for _, r := range recs {
		collected[r.ProviderJobID] = true
	}
	for i := range n {
		last, err := d.Ledger.Last(ctx, job, fmt.Sprintf("part-%05d", i))
		if err != nil {
			t.Fatal(err)
		}
		if want := i < 4; collected[last.ProviderJobID] != want {
			t.Errorf("shard %d's batch collected %v, want %v", i, collected[last.ProviderJobID], want)
		}
	}

	// Again, with the provider answering: the rest are collected, each
	// file once.
	od.failing = ""
	od.download.most = 0
	res, err := d.Collect(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range res.Shards {
		if want := map[bool]string{true: "already_collected", false: "collected"}[i < 4]; s.Action != want {
			t.Errorf("shard %s: %s, want %s", s.ShardID, s.Action, want)
		}
	}
	if od.download.most < 2 {
		t.Errorf("at most %d downloads at once, want 2 or more", od.download.most)
	}
	if left := leftovers(); len(left) > 0 {
		t.Errorf("files left behind: %v", left)
	}
	recs, err = d.Lake.IngestRecords(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]int{}
	for _, r := range recs {
		files[r.ProviderJobID+"/"+r.Channel]++
	}
	for f, k := range files {
		if k != 1 {
			t.Errorf("%s ingested %d times", f, k)
		}
	}
	if len(files) < n {
		t.Errorf("%d files ingested for %d shards", len(files), n)
	}
}

// TestMaxInFlightPollsSideBySide: with --max-in-flight, submit counts the
// job's unfinished batches by polling them side by side, up to
// lake.ShardFanout at a time.
func TestMaxInFlightPollsSideBySide(t *testing.T) {
	t.Parallel()
	n := lake.ShardFanout + 4
	d, job, _ := submittedSimJob(t, n)
	og := &overlapGet{Client: d.Client}
	d.Client, d.MaxInFlight = og, 2*n
	res, err := d.Submit(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	fannedOut(t, "batches polled", &og.get, n)
	for _, s := range res.Shards {
		if s.Action != "already_bound" {
			t.Errorf("shard %s: %s, want already_bound", s.ShardID, s.Action)
		}
	}
}

// TestCancelSideBySide: cancel asks the provider to cancel the shards'
// batches side by side, up to lake.ShardFanout at a time, then records what
// it did.
func TestCancelSideBySide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := lake.ShardFanout + 4
	d, job, m := submittedSimJob(t, n)
	if _, err := d.Status(ctx, job); err != nil {
		t.Fatal(err)
	}
	og := &overlapGet{Client: d.Client}
	d.Client = og
	res, err := d.Cancel(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	fannedOut(t, "batches cancelled", &og.cancel, n)
	for i, s := range res.Shards {
		if s.ShardID != m.Shards[i].ShardID || s.Action != "cancel_requested" {
			t.Errorf("shard %d: %+v, want %s cancel_requested", i, s, m.Shards[i].ShardID)
		}
	}
}
