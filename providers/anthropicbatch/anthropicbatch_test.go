package anthropicbatch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/fakeanthropic"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lifecycle"
	"github.com/batchlake/batchlake/providers"
	"github.com/batchlake/batchlake/providers/anthropicbatch"
)

// testKey looks like a real key so that a leak is unmistakable.
const testKey = "sk-ant-api03-TEST0123456789abcdefSECRET"

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }
func newClock() *clock               { return &clock{t: time.Now().UTC()} }

// must fails the test (by panicking: a test failure with its stack) on err.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// env is a lake, a fake Anthropic over loopback HTTP, the real adapter and
// a lifecycle driver using it.
type env struct {
	srv *fakeanthropic.Server
	c   *anthropicbatch.Client
	l   *lake.Lake
	drv *lifecycle.Driver
	clk *clock
	tmp string
}

func setup(t *testing.T, opts fakeanthropic.Options) *env {
	t.Helper()
	clk := newClock()
	opts.APIKey = testKey
	if opts.Now == nil {
		opts.Now = clk.Now
	}
	srv := fakeanthropic.New(opts)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	srv.SetBaseURL(hs.URL)
	tmp := t.TempDir()
	l := must(lake.Open(context.Background(), filepath.Join(tmp, "lake")))
	t.Cleanup(func() { l.Close() })
	c := must(anthropicbatch.New(anthropicbatch.Config{
		APIKey: testKey, BaseURL: hs.URL, RequestTimeout: 5 * time.Second, CreateTimeout: 5 * time.Second,
		PageSize: 2, Shards: lifecycle.LakeShards{Lake: l}, TmpDir: tmp,
	}))
	drv := &lifecycle.Driver{Lake: l, Ledger: lake.NewLedger(l, "tester"), Client: c, Target: "anthropic", Lease: time.Minute, TmpDir: tmp}
	return &env{srv: srv, c: c, l: l, drv: drv, clk: clk, tmp: tmp}
}

// plan writes n Anthropic requests r-000… and plans them in shards of per.
func (e *env) plan(t *testing.T, n, per int) lake.Digest {
	t.Helper()
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"custom_id":"r-%03d","params":{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"question %d"}]}}`+"\n", i, i)
	}
	in := filepath.Join(e.tmp, fmt.Sprintf("in-%d-%d.jsonl", n, per))
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	res := must(ingest.Plan(context.Background(), e.l, ingest.PlanOptions{Provider: "anthropic", Input: in, Tenant: "acme", PromptVersion: "v1", ShardMaxRecords: per, TmpDir: e.tmp}))
	return must(lake.ParseDigest(res.JobKey))
}

func (e *env) submit(t *testing.T, job lake.Digest) *lifecycle.Result {
	t.Helper()
	return must(e.drv.Submit(context.Background(), job))
}

func actions(r *lifecycle.Result) string {
	var a []string
	for _, s := range r.Shards {
		a = append(a, s.ShardID+":"+s.Action)
	}
	return strings.Join(a, " ")
}

func TestSubmitTwiceCreatesOnce(t *testing.T) {
	e := setup(t, fakeanthropic.Options{PollsPerStep: 100})
	job := e.plan(t, 6, 3) // two shards of equal size: each must not take the other's batch
	if got := actions(e.submit(t, job)); got != "part-00000:created part-00001:created" {
		t.Fatalf("first submit: %s", got)
	}
	r := e.submit(t, job)
	if got := actions(r); got != "part-00000:already_bound part-00001:already_bound" || r.Pending {
		t.Fatalf("second submit: %s pending=%v", got, r.Pending)
	}
	if n := e.srv.Count("POST", "/v1/messages/batches"); n != 2 || len(e.srv.Batches()) != 2 {
		t.Fatalf("%d creates, %d batches; want 2 and 2", n, len(e.srv.Batches()))
	}
}

func TestLostCreateIsFoundNotCreatedAgain(t *testing.T) {
	t.Parallel()
	e := setup(t, fakeanthropic.Options{PollsPerStep: 100, Faults: fakeanthropic.Faults{CreateLost: 1}})
	job := e.plan(t, 3, 3)
	r := e.submit(t, job)
	if got := actions(r); got != "part-00000:unknown" || !r.Pending {
		t.Fatalf("submit after a lost create: %s pending=%v", got, r.Pending)
	}
	if len(e.srv.Batches()) != 1 {
		t.Fatalf("the lost create made %d batches, want 1", len(e.srv.Batches()))
	}
	// The batch runs: it cannot be verified yet, so nothing is created.
	r = e.submit(t, job)
	if got := actions(r); got != "part-00000:unknown" || !strings.Contains(r.Shards[0].Detail, "cannot be verified") {
		t.Fatalf("submit while the batch runs: %s %q", got, r.Shards[0].Detail)
	}
	// Once it ended, its custom_ids prove it is the shard's batch.
	id := e.srv.Batches()[0]
	for range 100 {
		must(e.c.Get(context.Background(), id))
	}
	r = e.submit(t, job)
	if got := actions(r); got != "part-00000:found" || r.Shards[0].ProviderJobID != id {
		t.Fatalf("submit after the batch ended: %s %s, want found %s", got, r.Shards[0].ProviderJobID, id)
	}
	if n := len(e.srv.Batches()); n != 1 {
		t.Fatalf("%d batches, want 1", n)
	}
	evs := must(e.drv.Ledger.Events(context.Background(), job, "part-00000"))
	var noted bool
	for _, ev := range evs {
		noted = noted || strings.Contains(ev.Detail["unknown"], id)
	}
	if !noted {
		t.Fatalf("the ledger does not say which batch kept the shard unknown: %+v", evs)
	}
}

func TestCreateErrorsAfterCreatingAreUnknown(t *testing.T) {
	t.Parallel()
	for _, st := range []int{500, 429} {
		t.Run(fmt.Sprint(st), func(t *testing.T) {
			t.Parallel()
			e := setup(t, fakeanthropic.Options{PollsPerStep: 1, Faults: fakeanthropic.Faults{CreateErrorAfter: 1, CreateStatus: st}})
			job := e.plan(t, 2, 2)
			if got := actions(e.submit(t, job)); got != "part-00000:unknown" {
				t.Fatalf("submit: %s", got)
			}
			must(e.c.Get(context.Background(), e.srv.Batches()[0])) // ends it
			if got := actions(e.submit(t, job)); got != "part-00000:found" {
				t.Fatalf("resubmit: %s", got)
			}
			if n := len(e.srv.Batches()); n != 1 {
				t.Fatalf("%d batches, want 1", n)
			}
		})
	}
}

func TestRefusedCreateCreatesLater(t *testing.T) {
	e := setup(t, fakeanthropic.Options{Faults: fakeanthropic.Faults{CreateRefused: 1, CreateStatus: 400}})
	job := e.plan(t, 2, 2)
	if _, err := e.drv.Submit(context.Background(), job); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("submit with a refused create: %v", err)
	}
	if got := actions(e.submit(t, job)); got != "part-00000:created" {
		t.Fatalf("resubmit: %s", got)
	}
}

// A foreign batch with the shard's request count, created in the lookup
// window, must never be adopted: while it runs the shard stays unknown;
// once it ended its custom_ids rule it out and the shard's batch is created.
func TestForeignBatchIsNotAdopted(t *testing.T) {
	e := setup(t, fakeanthropic.Options{PollsPerStep: 100})
	job := e.plan(t, 3, 3)
	foreign := e.srv.Inject([]string{"x-1", "x-2", "x-3"}, e.clk.Now().Add(-time.Minute), false)
	e.srv.Inject([]string{"y-1", "y-2", "y-3", "y-4"}, e.clk.Now(), false)            // more requests: no candidate
	e.srv.Inject([]string{"z-1", "z-2", "z-3"}, e.clk.Now().Add(-2*time.Hour), false) // outside the window
	r := e.submit(t, job)
	if got := actions(r); got != "part-00000:unknown" || !strings.Contains(r.Shards[0].Detail, foreign) || !r.Pending {
		t.Fatalf("submit beside a running foreign batch: %s %q", got, r.Shards[0].Detail)
	}
	if strings.Contains(r.Shards[0].Detail, "msgbatch_000003") {
		t.Fatalf("a batch outside the window was considered: %q", r.Shards[0].Detail)
	}
	last := must(e.drv.Ledger.Last(context.Background(), job, "part-00000"))
	if last.State != lake.Submitting || last.ProviderJobID != "" {
		t.Fatalf("shard is %s bound to %q, want SUBMITTING and unbound", last.State, last.ProviderJobID)
	}
	for range 100 {
		must(e.c.Get(context.Background(), foreign))
	}
	r = e.submit(t, job)
	if got := actions(r); got != "part-00000:created" || r.Shards[0].ProviderJobID == foreign {
		t.Fatalf("submit after the foreign batch ended: %s %s", got, r.Shards[0].ProviderJobID)
	}
}

// A batch still in progress whose request_counts add up to less than the
// shard's size may be the shard's batch with its counts still filling (a
// lost create): it is unverified, not absent, and nothing is created until
// it ends and its custom_ids decide.
func TestFillingCountsAreUnverifiedNotAbsent(t *testing.T) {
	t.Parallel()
	e := setup(t, fakeanthropic.Options{PollsPerStep: 100, FillViews: 3, Faults: fakeanthropic.Faults{CreateLost: 1}})
	job := e.plan(t, 4, 4)
	if got := actions(e.submit(t, job)); got != "part-00000:unknown" {
		t.Fatalf("submit after a lost create: %s", got)
	}
	id := e.srv.Batches()[0]
	// The lost batch's counts are still filling: partial, so a count match alone would miss it.
	b := must(e.c.Get(context.Background(), id))
	if b.Total >= 4 {
		t.Fatalf("the fake shows %d of 4 requests on its second view; want counts still filling", b.Total)
	}
	_, err := e.c.Find(context.Background(), job.Hex(), "part-00000", e.clk.Now().Add(-time.Minute))
	if !errors.Is(err, providers.ErrUnknownOutcome) || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), "of 4 requests counted") {
		t.Fatalf("Find beside a batch with filling counts: %v; want unknown naming %s", err, id)
	}
	r := e.submit(t, job)
	if got := actions(r); got != "part-00000:unknown" || !r.Pending {
		t.Fatalf("resubmit beside a batch with filling counts: %s", got)
	}
	if n := e.srv.Count("POST", "/v1/messages/batches"); n != 1 || len(e.srv.Batches()) != 1 {
		t.Fatalf("%d creates, %d batches; want 1 and 1", n, len(e.srv.Batches()))
	}
	for range 100 {
		must(e.c.Get(context.Background(), id))
	}
	if got := actions(e.submit(t, job)); got != "part-00000:found" {
		t.Fatalf("submit after the batch ended: %s", got)
	}
}

func TestFindWithoutShardIndexRefuses(t *testing.T) {
	c := must(anthropicbatch.New(anthropicbatch.Config{APIKey: testKey, BaseURL: "http://127.0.0.1:1/"}))
	_, err := c.Find(context.Background(), "j", "s", time.Now())
	if err == nil || errors.Is(err, providers.ErrUnknownOutcome) {
		t.Fatalf("Find without a shard index: %v", err)
	}
}

func TestKeyNeverInErrors(t *testing.T) {
	e := setup(t, fakeanthropic.Options{})
	c := must(anthropicbatch.New(anthropicbatch.Config{APIKey: testKey + "x", BaseURL: e.srv.Base(), RequestTimeout: time.Second}))
	_, err := c.Get(context.Background(), "msgbatch_nope")
	if err == nil || strings.Contains(err.Error(), testKey) {
		t.Fatalf("error with a wrong key: %v", err)
	}
	var apiErr *anthropicbatch.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Fatalf("want a 401 APIError, got %v", err)
	}
}
