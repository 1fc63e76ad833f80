package lifecycle_test

// The submit protocol's "never pay twice" guarantees, driver-level: two
// submitters (two Drivers with ledgers of different actors, as two pods)
// against one lake, the real adapters talking to the fake providers over
// loopback HTTP.

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"gocloud.dev/blob"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/fakeanthropic"
	"github.com/batchlake/batchlake/internal/fakebedrock"
	"github.com/batchlake/batchlake/internal/fakegemini"
	"github.com/batchlake/batchlake/internal/fakeopenai"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lifecycle"
	"github.com/batchlake/batchlake/providers"
	"github.com/batchlake/batchlake/providers/anthropicbatch"
	"github.com/batchlake/batchlake/providers/bedrockbatch"
	"github.com/batchlake/batchlake/providers/geminibatch"
	"github.com/batchlake/batchlake/providers/openaibatch"
	"github.com/batchlake/batchlake/reconcile"
)

// rig is one lake, one fake provider and a way to make submitters.
type rig struct {
	t      *testing.T
	l      *lake.Lake
	tmp    string
	target string
	// client makes a fresh adapter (one per submitter, as in separate pods).
	client func() providers.Client
	// batches counts the batches the fake provider holds.
	batches func() int
	job     lake.Digest
	shard   string
}

func newLake(t *testing.T) (*lake.Lake, string) {
	t.Helper()
	tmp := t.TempDir()
	l, err := lake.Open(context.Background(), filepath.Join(tmp, "lake"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, tmp
}

// plan plans input (JSONL lines) for provider into one shard.
func (r *rig) plan(provider, model string, lines []string) {
	r.t.Helper()
	var b bytes.Buffer
	for _, ln := range lines {
		b.WriteString(ln + "\n")
	}
	in := filepath.Join(r.tmp, "in.jsonl")
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		r.t.Fatal(err)
	}
	res, err := ingest.Plan(context.Background(), r.l, ingest.PlanOptions{Provider: provider, Model: model, Input: in, Tenant: "acme", PromptVersion: "p1", ShardMaxRecords: 1000, TmpDir: r.tmp})
	if err != nil {
		r.t.Fatal(err)
	}
	if r.job, err = lake.ParseDigest(res.JobKey); err != nil {
		r.t.Fatal(err)
	}
	m, err := r.l.GetManifest(context.Background(), r.job)
	if err != nil || len(m.Shards) != 1 {
		r.t.Fatalf("manifest: %v, %d shards", err, len(m.Shards))
	}
	r.shard = m.Shards[0].ShardID
}

// submitter is a driver acting as actor with the given timings.
func (r *rig) submitter(actor string, lease, margin, settle time.Duration) *lifecycle.Driver {
	g := lake.NewLedger(r.l, actor)
	g.TakeoverMargin = margin
	return &lifecycle.Driver{Lake: r.l, Ledger: g, Client: r.client(), Target: r.target, Lease: lease, TmpDir: r.tmp,
		Settle: settle, LostLookup: -1}
}

// shard is the job's only shard's last ledger event.
func (r *rig) last() lake.Event {
	r.t.Helper()
	ev, err := lake.NewLedger(r.l, "reader").Last(context.Background(), r.job, r.shard)
	if err != nil {
		r.t.Fatal(err)
	}
	return ev
}

// submitUntilBound runs fresh submitters until the shard is bound.
func (r *rig) submitUntilBound(lease, margin, settle time.Duration) string {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		res, err := r.submitter(fmt.Sprintf("later-%d", i), lease, margin, settle).Submit(context.Background(), r.job)
		if err != nil {
			r.t.Fatalf("later submit: %v", err)
		}
		if !res.Pending {
			return res.Shards[0].ProviderJobID
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("shard still not bound after 20 s: %+v", res.Shards)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func openaiLines(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf(`{"custom_id":"r%d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"q%d"}]}}`, i, i))
	}
	return out
}

func openaiRig(t *testing.T, opts fakeopenai.Options) (*rig, *fakeopenai.Server) {
	t.Helper()
	srv := fakeopenai.New(opts)
	url, err := srv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	l, tmp := newLake(t)
	r := &rig{t: t, l: l, tmp: tmp, target: "openai",
		client: func() providers.Client {
			c, err := openaibatch.New(openaibatch.Config{APIKey: fakeopenai.DefaultAPIKey, BaseURL: url, CreateTimeout: 5 * time.Second, RequestTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
		batches: func() int { return len(srv.Batches()) },
	}
	r.plan("openai", "", openaiLines(3))
	return r, srv
}

// slowUploadRound: submitter A's upload takes longer than its lease; B tries
// the shard once A's lease would have run out (past the takeover margin),
// while A is still uploading; afterwards fresh submitters run until the
// shard is bound. The provider must hold exactly one batch, bound to the
// shard, and no duplicate may be recorded.
func slowUploadRound(t *testing.T, r *rig, uploading func() bool, lease, margin time.Duration) {
	t.Helper()
	ctx := context.Background()
	a := r.submitter("A", lease, margin, 100*time.Millisecond)
	b := r.submitter("B", lease, margin, 100*time.Millisecond)
	var wg sync.WaitGroup
	var resA *lifecycle.Result
	var errA error
	wg.Add(1)
	go func() {
		defer wg.Done()
		resA, errA = a.Submit(ctx, r.job)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !uploading() {
		if time.Now().After(deadline) {
			t.Fatal("A's upload never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(lease + margin + 100*time.Millisecond) // A's first lease (and the margin) are over
	resB, errB := b.Submit(ctx, r.job)
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("A: %v, B: %v", errA, errB)
	}
	bound := r.submitUntilBound(lease, margin, 100*time.Millisecond)
	if n := r.batches(); n != 1 {
		t.Fatalf("provider holds %d batches for one shard, want 1 (A %+v, B %+v)", n, resA.Shards, resB.Shards)
	}
	if bound == "" || r.last().ProviderJobID != bound {
		t.Errorf("shard bound to %q, ledger says %q", bound, r.last().ProviderJobID)
	}
	recs, err := lake.NewLedger(r.l, "reader").BatchRecords(ctx, r.job, r.shard)
	if err != nil || len(recs) != 0 {
		t.Errorf("duplicate batches recorded: %+v %v", recs, err)
	}
}

// rounds runs f n times in parallel (the slow-upload loops), fewer in -short.
func rounds(t *testing.T, n int, f func(t *testing.T)) {
	t.Helper()
	if testing.Short() {
		n = 1 // the full loop proves it holds every time; -short keeps one round
	}
	for i := range n {
		t.Run(fmt.Sprintf("round %d", i+1), func(t *testing.T) {
			t.Parallel()
			f(t)
		})
	}
}

// submitting reports whether A holds the shard (its upload is under way).
func (r *rig) submitting() bool {
	ev := r.last()
	return ev.State == lake.Submitting && ev.Actor == "A"
}

// TestSlowUploadOneBatch: A's upload (the file for OpenAI and Gemini, the
// create's inline body for Anthropic) takes 1.5 s, its lease 600 ms, and B
// tries the shard once the lease and the takeover margin would be over. For
// a file upload A's heartbeat keeps the shard and B steps back; for an
// Anthropic body the create is cut at A's lease deadline (no batch is made)
// and B creates. Either way: exactly one batch, every round.
func TestSlowUploadOneBatch(t *testing.T) {
	const lease, margin, delay = 600 * time.Millisecond, 100 * time.Millisecond, 1500 * time.Millisecond
	// Not parallel with the other tests: a create slowed past the 600 ms
	// lease by a loaded machine ends unknown, and the shard then waits
	// (rightly) for that batch to end. The providers' rounds run together.
	t.Run("openai", func(t *testing.T) {
		t.Parallel()
		rounds(t, 20, func(t *testing.T) {
			r, srv := openaiRig(t, fakeopenai.Options{Seed: 1, Faults: fakeopenai.Faults{UploadSlow: 1, UploadDelay: delay}})
			slowUploadRound(t, r, func() bool { return srv.CountRequests("POST", "/v1/files") > 0 }, lease, margin)
		})
	})
	t.Run("anthropic", func(t *testing.T) {
		t.Parallel()
		rounds(t, 20, func(t *testing.T) {
			r := anthropicRig(t, fakeanthropic.Faults{UploadSlow: 1, UploadDelay: delay})
			slowUploadRound(t, r, r.submitting, lease, margin)
		})
	})
	t.Run("gemini", func(t *testing.T) {
		t.Parallel()
		rounds(t, 20, func(t *testing.T) {
			r := geminiRig(t, fakegemini.Faults{UploadSlow: 1, UploadDelay: delay})
			slowUploadRound(t, r, r.submitting, lease, margin)
		})
	})
	t.Run("bedrock", func(t *testing.T) {
		t.Parallel()
		rounds(t, 20, func(t *testing.T) {
			r := bedrockRig(t, delay)
			slowUploadRound(t, r, r.submitting, lease, margin)
		})
	})
}

// bedrockRig is fakebedrock with its S3 (gofakes3) behind a front that
// makes the first PUT of a staged input take delay to arrive, as a large
// upload does (the object is stored only after it; a client that gives up
// first leaves none).
func bedrockRig(t *testing.T, delay time.Duration) *rig {
	t.Helper()
	const model = "anthropic.claude-3-haiku-20240307-v1:0"
	// The staging bucket exists before the two submitters' first requests:
	// gofakes3's auto-bucket checks, then creates, so concurrent first
	// requests could see NoSuchBucket.
	backend := s3mem.New()
	if err := backend.CreateBucket("staging"); err != nil {
		t.Fatal(err)
	}
	faker := gofakes3.New(backend, gofakes3.WithAutoBucket(true), gofakes3.WithLogger(gofakes3.DiscardLog()))
	var slowOnce sync.Once
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/staging/in/") {
			slow := false
			slowOnce.Do(func() { slow = true })
			if slow {
				select {
				case <-time.After(delay):
				case <-r.Context().Done():
					return
				}
			}
		}
		faker.Server().ServeHTTP(w, r)
	}))
	t.Cleanup(s3.Close)
	q := url.Values{"region": {"us-east-1"}, "endpoint": {s3.URL}, "use_path_style": {"true"}, "disable_https": {"true"},
		"response_checksum_validation": {"when_required"}, "request_checksum_calculation": {"when_required"}}
	srv := fakebedrock.New(fakebedrock.Options{OpenBucket: func(ctx context.Context, name string) (*blob.Bucket, error) {
		return blob.OpenBucket(ctx, "s3://"+name+"?"+q.Encode())
	}})
	brk := httptest.NewServer(srv.Handler())
	t.Cleanup(brk.Close)
	l, tmp := newLake(t)
	r := &rig{t: t, l: l, tmp: tmp, target: "bedrock",
		client: func() providers.Client {
			c, err := bedrockbatch.New(context.Background(), bedrockbatch.Config{Endpoint: brk.URL, RoleARN: "arn:aws:iam::123456789012:role/batchlake-bedrock",
				Model:  func(context.Context, string) (string, error) { return model, nil },
				Input:  "s3://staging/in/?" + q.Encode(),
				Output: "s3://staging/out/?" + q.Encode()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		},
		batches: func() int { return len(srv.Jobs()) },
	}
	var lines []string
	for i := range 3 {
		lines = append(lines, fmt.Sprintf(`{"recordId":"REC%08d","modelInput":{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,"messages":[{"role":"user","content":[{"type":"text","text":"question %d"}]}]}}`, i, i))
	}
	r.plan("bedrock", model, lines)
	return r
}

func anthropicRig(t *testing.T, faults fakeanthropic.Faults) *rig {
	t.Helper()
	const key = "sk-ant-fake-0000"
	srv := fakeanthropic.New(fakeanthropic.Options{APIKey: key, Faults: faults})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	srv.SetBaseURL(hs.URL)
	l, tmp := newLake(t)
	r := &rig{t: t, l: l, tmp: tmp, target: "anthropic",
		client: func() providers.Client {
			c, err := anthropicbatch.New(anthropicbatch.Config{APIKey: key, BaseURL: hs.URL, RequestTimeout: 5 * time.Second, CreateTimeout: 5 * time.Second,
				Shards: lifecycle.LakeShards{Lake: l}, TmpDir: tmp})
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
		batches: func() int { return len(srv.Batches()) },
	}
	var lines []string
	for i := range 3 {
		lines = append(lines, fmt.Sprintf(`{"custom_id":"r-%03d","params":{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"question %d"}]}}`, i, i))
	}
	r.plan("anthropic", "", lines)
	return r
}

func geminiRig(t *testing.T, faults fakegemini.Faults) *rig {
	t.Helper()
	const key = "AIza-fake-0000"
	srv := fakegemini.New(fakegemini.Options{APIKey: key, Faults: faults})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	srv.SetBaseURL(hs.URL)
	l, tmp := newLake(t)
	r := &rig{t: t, l: l, tmp: tmp, target: "gemini",
		client: func() providers.Client {
			c, err := geminibatch.New(geminibatch.Config{APIKey: key, BaseURL: hs.URL, RequestTimeout: 5 * time.Second, CreateTimeout: 5 * time.Second,
				Jobs: lifecycle.LakeShards{Lake: l}})
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
		batches: func() int { return len(srv.Batches()) },
	}
	var lines []string
	for i := range 3 {
		lines = append(lines, fmt.Sprintf(`{"key":"r-%03d","request":{"contents":[{"parts":[{"text":"question %d"}]}]}}`, i, i))
	}
	r.plan("gemini", "gemini-2.5-flash", lines)
	return r
}

// raceClient runs before() once, just before the first create is sent.
type raceClient struct {
	providers.Client
	once   sync.Once
	before func()
}

func (c *raceClient) Create(ctx context.Context, fileID, endpoint string, meta map[string]string) (*providers.Batch, error) {
	c.once.Do(c.before)
	return c.Client.Create(ctx, fileID, endpoint, meta)
}

// TestLostRaceDuplicateBatch: the holder loses the shard after its create
// went out (B, whose clock runs ahead by more than the margin, took it over
// and created its own batch first). The holder cannot bind its batch; it
// records it. Status cancels it and shows it, collect ingests what it
// finished, and reconcile reports it and prices its lines as
// duplicate_submission.
func TestLostRaceDuplicateBatch(t *testing.T) {
	ctx := context.Background()
	ok := &fakeopenai.Rates{}
	r, srv := openaiRig(t, fakeopenai.Options{Seed: 3, Rates: ok})
	const lease = 2 * time.Second
	b := r.submitter("B", lease, 0, time.Second)
	b.Ledger.Now = func() time.Time { return time.Now().UTC().Add(lease + 5*time.Second) } // B's clock is far ahead
	var resB *lifecycle.Result
	a := r.submitter("A", lease, 0, time.Second)
	a.Client = &raceClient{Client: a.Client, before: func() {
		var err error
		if resB, err = b.Submit(ctx, r.job); err != nil {
			t.Errorf("B: %v", err)
		}
	}}
	resA, err := a.Submit(ctx, r.job)
	if err != nil {
		t.Fatal(err)
	}
	if resB == nil || resB.Shards[0].Action != "created" {
		t.Fatalf("B did not create during A's create: %+v", resB)
	}
	if got := resA.Shards[0]; got.Action != "lease_lost" || !resA.Pending {
		t.Errorf("A: %+v, want lease_lost and pending", got)
	}
	bound, dup := resB.Shards[0].ProviderJobID, resA.Shards[0].ProviderJobID
	if n := len(srv.Batches()); n != 2 || bound == dup || r.last().ProviderJobID != bound {
		t.Fatalf("want 2 batches, the shard bound to B's %s: %d batches, ledger %s, A made %s", bound, n, r.last().ProviderJobID, dup)
	}

	c := r.submitter("C", lease, 0, time.Second)
	st, err := c.Status(ctx, r.job)
	if err != nil {
		t.Fatal(err)
	}
	if d := st.Shards[0].Duplicates; len(d) != 1 || d[0].ProviderJobID != dup || d[0].Action != "cancel_requested" || d[0].Why != "created_after_lease_lost" || !st.Pending {
		t.Fatalf("status: duplicates %+v pending %v, want %s cancel_requested", d, st.Pending, dup)
	}
	for i := 0; st.Pending; i++ {
		if i > 50 {
			t.Fatalf("status still pending: %+v", st.Shards)
		}
		if st, err = c.Status(ctx, r.job); err != nil {
			t.Fatal(err)
		}
	}
	if d := st.Shards[0].Duplicates; len(d) != 1 || d[0].ProviderStatus != "cancelled" {
		t.Errorf("duplicate after status: %+v, want cancelled", d)
	}
	col, err := c.Collect(ctx, r.job)
	if err != nil {
		t.Fatal(err)
	}
	if d := col.Shards[0].Duplicates; len(d) != 1 || d[0].Action != "collected" {
		t.Errorf("collect: duplicates %+v, want collected", d)
	}
	rep, err := reconcile.Run(ctx, r.l, reconcile.Options{JobKey: r.job.Hex(), MaxAttempts: 3, TmpDir: r.tmp})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.DuplicateBatches) != 1 || rep.DuplicateBatches[0].ProviderJobID != dup || rep.DuplicateBatches[0].BoundTo != bound {
		t.Errorf("report duplicate_batches %+v, want %s beside %s", rep.DuplicateBatches, dup, bound)
	}
	if cost, err := rep.CostUSD["duplicate_submission"].Float64(); rep.Duplicate == 0 || err != nil || cost <= 0 {
		t.Errorf("report: duplicate %d, duplicate_submission cost %q: the duplicate batch's lines are not counted", rep.Duplicate, rep.CostUSD["duplicate_submission"])
	}
	t.Logf("report: duplicate %d, costs %v, duplicate batches %+v", rep.Duplicate, rep.CostUSD, rep.DuplicateBatches)
	if rep.Succeeded != 3 {
		t.Errorf("report: %d succeeded, want 3", rep.Succeeded)
	}
}

// TestHeartbeatLosesCancelsUpload: B, whose clock runs far ahead, takes the
// shard over while A uploads. A's next renewal loses, which cancels A's
// upload: A creates nothing (lease_lost), B binds the only batch.
func TestHeartbeatLosesCancelsUpload(t *testing.T) {
	ctx := context.Background()
	r, srv := openaiRig(t, fakeopenai.Options{Seed: 5, Faults: fakeopenai.Faults{UploadSlow: 1, UploadDelay: 5 * time.Second}})
	const lease = 900 * time.Millisecond
	a := r.submitter("A", lease, 0, time.Second)
	b := r.submitter("B", lease, 0, time.Second)
	b.Ledger.Now = func() time.Time { return time.Now().UTC().Add(lease + time.Second) }
	done := make(chan struct{})
	var resA *lifecycle.Result
	var errA error
	start := time.Now()
	go func() {
		defer close(done)
		resA, errA = a.Submit(ctx, r.job)
	}()
	for srv.CountRequests("POST", "/v1/files") == 0 {
		if time.Since(start) > 10*time.Second {
			t.Fatal("A's upload never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	resB, err := b.Submit(ctx, r.job)
	if err != nil || resB.Shards[0].Action != "created" {
		t.Fatalf("B: %+v %v, want created", resB, err)
	}
	<-done
	if errA != nil || resA.Shards[0].Action != "lease_lost" {
		t.Fatalf("A: %+v %v, want lease_lost", resA, errA)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("A returned after %s: its 5 s upload was not cancelled when its renewal lost", took)
	}
	if n := len(srv.Batches()); n != 1 || r.last().ProviderJobID != resB.Shards[0].ProviderJobID {
		t.Errorf("%d batches, shard bound to %q, want B's %s only", n, r.last().ProviderJobID, resB.Shards[0].ProviderJobID)
	}
}
