package lifecycle_test

// The synchronous tail, driver-level: the real adapters' real-time clients
// against the fake providers' real-time routes over loopback HTTP, the real
// lake and the real reconcile.

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/batchlake/batchlake/errkind"
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

// syncRig is a rig whose job is sent through a real-time client.
type syncRig struct {
	*rig
	rt    func() providers.RealTime
	calls func() (processed, dropped int)
	// id is the record id of the i-th line.
	id func(i int) string
}

// rtAttemptTimeout bounds each real-time attempt. It only guards against a
// hang: the attempt's lake writes (the call and answer records, each
// synced) run inside it, and on a machine busy with parallel tests a sync
// can take seconds; an attempt cut after its answer arrived leaves the
// record unfinished and the test failing for the wrong reason.
const rtAttemptTimeout = 30 * time.Second

// rtFaults are the real-time faults a test injects, whatever the provider.
type rtFaults struct {
	rateLimited, serverError, dropped, badRequest int
	// retryAfter is the wait (whole seconds) a rate limit asks for.
	retryAfter int
}

func openaiSyncRig(t *testing.T, n int, f rtFaults) *syncRig {
	t.Helper()
	r, srv := openaiRig(t, fakeopenai.Options{RealTime: fakeopenai.RealTimeFaults{RateLimited: f.rateLimited, RetryAfter: fmt.Sprint(f.retryAfter),
		ServerError: f.serverError, Dropped: f.dropped, BadRequest: f.badRequest}})
	r.plan("openai", "", openaiLines(n))
	base, _ := srv.Start()
	return &syncRig{rig: r, id: func(i int) string { return fmt.Sprintf("r%d", i) },
		rt: func() providers.RealTime {
			c, err := openaibatch.NewRealTime(openaibatch.Config{APIKey: fakeopenai.DefaultAPIKey, BaseURL: base, RequestTimeout: rtAttemptTimeout})
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
		calls: func() (p, d int) {
			for _, c := range srv.RealTimeCalls() {
				p++
				if c.Dropped {
					d++
				}
			}
			return p, d
		},
	}
}

func anthropicSyncRig(t *testing.T, n int, f rtFaults) *syncRig {
	t.Helper()
	const key = "sk-ant-fake-0000"
	srv := fakeanthropic.New(fakeanthropic.Options{APIKey: key, RealTime: fakeanthropic.RealTimeFaults{RateLimited: f.rateLimited, RetryAfter: fmt.Sprint(f.retryAfter),
		Overloaded: f.serverError, Dropped: f.dropped, BadRequest: f.badRequest}})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	srv.SetBaseURL(hs.URL)
	l, tmp := newLake(t)
	r := &rig{t: t, l: l, tmp: tmp, target: "anthropic"}
	var lines []string
	for i := range n {
		lines = append(lines, fmt.Sprintf(`{"custom_id":"r-%03d","params":{"model":"claude-sonnet-4-6","max_tokens":64,"messages":[{"role":"user","content":"question %d"}]}}`, i, i))
	}
	r.plan("anthropic", "", lines)
	return &syncRig{rig: r, id: func(i int) string { return fmt.Sprintf("r-%03d", i) },
		rt: func() providers.RealTime {
			c, err := anthropicbatch.NewRealTime(anthropicbatch.Config{APIKey: key, BaseURL: hs.URL, RequestTimeout: rtAttemptTimeout})
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
		calls: func() (p, d int) {
			for _, c := range srv.RealTimeCalls() {
				p++
				if c.Dropped {
					d++
				}
			}
			return p, d
		},
	}
}

func geminiSyncRig(t *testing.T, n int, f rtFaults) *syncRig {
	t.Helper()
	const key = "AIza-fake-0000"
	srv := fakegemini.New(fakegemini.Options{APIKey: key, RealTime: fakegemini.RealTimeFaults{RateLimited: f.rateLimited, RetryDelay: fmt.Sprintf("%ds", f.retryAfter),
		Unavailable: f.serverError, Dropped: f.dropped, BadRequest: f.badRequest}})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	srv.SetBaseURL(hs.URL)
	l, tmp := newLake(t)
	r := &rig{t: t, l: l, tmp: tmp, target: "gemini"}
	var lines []string
	for i := range n {
		lines = append(lines, fmt.Sprintf(`{"key":"r-%03d","request":{"contents":[{"parts":[{"text":"question %d"}]}]}}`, i, i))
	}
	r.plan("gemini", "gemini-2.5-flash", lines)
	return &syncRig{rig: r, id: func(i int) string { return fmt.Sprintf("r-%03d", i) },
		rt: func() providers.RealTime {
			c, err := geminibatch.NewRealTime(geminibatch.Config{APIKey: key, BaseURL: hs.URL, RequestTimeout: rtAttemptTimeout}, "gemini-2.5-flash")
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
		calls: func() (p, d int) {
			for _, c := range srv.RealTimeCalls() {
				if c.Model != "models/gemini-2.5-flash" {
					t.Errorf("call to %s, want models/gemini-2.5-flash", c.Model)
				}
				p++
				if c.Dropped {
					d++
				}
			}
			return p, d
		},
	}
}

func bedrockSyncRig(t *testing.T, n int, f rtFaults) *syncRig {
	t.Helper()
	const model = "anthropic.claude-3-haiku-20240307-v1:0"
	ra := ""
	if f.retryAfter > 0 {
		ra = fmt.Sprint(f.retryAfter)
	}
	srv := fakebedrock.New(fakebedrock.Options{RealTime: fakebedrock.RealTimeFaults{RateLimited: f.rateLimited, RetryAfter: ra,
		Unavailable: f.serverError, Dropped: f.dropped, BadRequest: f.badRequest}})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	l, tmp := newLake(t)
	r := &rig{t: t, l: l, tmp: tmp, target: "bedrock"}
	var lines []string
	for i := range n {
		lines = append(lines, fmt.Sprintf(`{"recordId":"REC%08d","modelInput":{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,"messages":[{"role":"user","content":[{"type":"text","text":"question %d"}]}]}}`, i, i))
	}
	r.plan("bedrock", model, lines)
	return &syncRig{rig: r, id: func(i int) string { return fmt.Sprintf("REC%08d", i) },
		rt: func() providers.RealTime {
			c, err := bedrockbatch.NewRealTime(context.Background(), bedrockbatch.Config{Endpoint: hs.URL, RequestTimeout: rtAttemptTimeout}, model, "InvokeModel")
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
		calls: func() (p, d int) {
			for _, c := range srv.RealTimeCalls() {
				if c.Model != model {
					t.Errorf("call to %s, want %s", c.Model, model)
				}
				p++
				if c.Dropped {
					d++
				}
			}
			return p, d
		},
	}
}

var syncRigs = []struct {
	name string
	make func(t *testing.T, n int, f rtFaults) *syncRig
}{
	{"openai", openaiSyncRig},
	{"anthropic", anthropicSyncRig},
	{"gemini", geminiSyncRig},
	{"bedrock", bedrockSyncRig},
}

func (r *syncRig) send(actor string, o lifecycle.SyncOptions) *lifecycle.SyncResult {
	r.t.Helper()
	o.RealTime = r.rt()
	g := lake.NewLedger(r.l, actor)
	d := &lifecycle.Driver{Lake: r.l, Ledger: g, Target: r.target, Lease: time.Minute, TmpDir: r.tmp}
	res, err := d.SubmitSync(context.Background(), r.job, o)
	if err != nil {
		r.t.Fatalf("sync: %v", err)
	}
	return res
}

func (r *syncRig) reconcile() *reconcile.Report {
	r.t.Helper()
	rep, err := reconcile.Run(context.Background(), r.l, reconcile.Options{JobKey: r.job.Hex(), MaxAttempts: 3, TmpDir: r.tmp})
	if err != nil {
		r.t.Fatal(err)
	}
	return rep
}

// TestSyncFaults, per provider: rate limits (429 with retry-after), server
// errors and a dropped connection on the way; every record ends answered,
// the dropped call (processed by the provider, its answer lost, sent again
// by the SDK) is a counted duplicate priced as duplicate_submission, and a
// second run sends nothing.
func TestSyncFaults(t *testing.T) {
	t.Parallel()
	for _, c := range syncRigs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := c.make(t, 6, rtFaults{rateLimited: 2, serverError: 1, dropped: 1})
			res := r.send("A", lifecycle.SyncOptions{Concurrency: 2})
			if len(res.Shards) != 1 {
				t.Fatalf("shards: %+v", res.Shards)
			}
			sh := res.Shards[0]
			if sh.State != lake.Running || sh.Answered != 6 || sh.Unfinished != 0 || sh.MaybeSent != 1 {
				t.Fatalf("shard: %+v", sh)
			}
			processed, dropped := r.calls()
			if processed != 7 || dropped != 1 {
				t.Fatalf("provider processed %d calls (%d dropped), want 7 (1)", processed, dropped)
			}
			// 6 answered + 2 rate limited + 1 server error + 1 dropped attempts.
			if sh.Calls != 10 {
				t.Errorf("calls = %d, want 10", sh.Calls)
			}
			rep := r.reconcile()
			if rep.Succeeded != 6 || rep.Duplicate != 1 || rep.Missing != 0 {
				t.Fatalf("report: succeeded %d duplicate %d missing %d", rep.Succeeded, rep.Duplicate, rep.Missing)
			}
			if _, ok := rep.CostUSD["duplicate_submission"]; !ok {
				t.Errorf("no duplicate_submission cost: %v", rep.CostUSD)
			}
			again := r.send("B", lifecycle.SyncOptions{})
			if again.Shards[0].Action != "already_sent" {
				t.Fatalf("second run: %+v", again.Shards[0])
			}
			if p, _ := r.calls(); p != processed {
				t.Fatalf("second run made %d more calls", p-processed)
			}
		})
	}
}

// TestSyncPermanentError: an error answer (400) is the record's result, an
// error line reconcile classifies as a permanent failure; nothing is resent.
func TestSyncPermanentError(t *testing.T) {
	t.Parallel()
	for _, c := range syncRigs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := c.make(t, 3, rtFaults{badRequest: 1})
			res := r.send("A", lifecycle.SyncOptions{Concurrency: 1})
			if sh := res.Shards[0]; sh.Answered != 3 || sh.MaybeSent != 0 || sh.Calls != 3 {
				t.Fatalf("shard: %+v", sh)
			}
			rep := r.reconcile()
			if rep.Succeeded != 2 || rep.FailedPermanent != 1 || rep.Duplicate != 0 {
				t.Fatalf("report: succeeded %d permanent %d duplicate %d", rep.Succeeded, rep.FailedPermanent, rep.Duplicate)
			}
		})
	}
}

// TestSyncCancel: an interrupt stops new calls, waits for those in flight,
// and writes what finished; the records not sent are missing in reconcile
// (and go to the next retry), none is lost or sent twice.
func TestSyncCancel(t *testing.T) {
	t.Parallel()
	r := openaiSyncRig(t, 8, rtFaults{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := &lifecycle.Driver{Lake: r.l, Ledger: lake.NewLedger(r.l, "A"), Target: r.target, Lease: time.Minute, TmpDir: r.tmp}
	res, err := d.SubmitSync(ctx, r.job, lifecycle.SyncOptions{RealTime: r.rt(), Concurrency: 1, Progress: func(done, _ int64) {
		if done == 3 {
			cancel()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	sh := res.Shards[0]
	if !res.Cancelled || sh.Action != "cancelled" || sh.Answered < 3 || sh.Answered+sh.Unfinished != 8 || sh.Unfinished == 0 {
		t.Fatalf("cancelled run: %+v", res)
	}
	if p, _ := r.calls(); int64(p) != sh.Answered {
		t.Fatalf("provider processed %d calls, %d answered", p, sh.Answered)
	}
	rep := r.reconcile()
	if rep.Succeeded != sh.Answered || rep.Missing != sh.Unfinished || rep.Duplicate != 0 {
		t.Fatalf("report: %d succeeded, %d missing, %d duplicate", rep.Succeeded, rep.Missing, rep.Duplicate)
	}
}

// TestSyncRetryAfter: a rate limit's wait (retry-after, or Gemini's
// RetryInfo) is honoured before the call is sent again.
func TestSyncRetryAfter(t *testing.T) {
	t.Parallel()
	for _, c := range syncRigs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := c.make(t, 1, rtFaults{rateLimited: 1, retryAfter: 1})
			start := time.Now()
			res := r.send("A", lifecycle.SyncOptions{})
			if el := time.Since(start); el < time.Second {
				t.Errorf("sent again after %s, before the 1 s the rate limit asked for", el)
			}
			if sh := res.Shards[0]; sh.Answered != 1 || sh.Calls != 2 || sh.MaybeSent != 0 {
				t.Fatalf("shard: %+v", sh)
			}
		})
	}
}

// TestSyncAndBatchExclusive: a shard is sent one way only. A batch submit
// of a shard being sent through the real-time API is refused, and so is a
// sync of a shard submitted as a batch; neither makes a provider call.
func TestSyncAndBatchExclusive(t *testing.T) {
	t.Parallel()
	t.Run("batch submit of a sync shard", func(t *testing.T) {
		t.Parallel()
		r := openaiSyncRig(t, 3, rtFaults{})
		g := lake.NewLedger(r.l, "syncer")
		if _, err := g.Transition(context.Background(), r.job, r.shard, lake.Submitting, -time.Second, "", map[string]string{"target": "openai", lifecycle.DetailMode: lifecycle.ModeSync}); err != nil {
			t.Fatal(err)
		}
		_, err := r.submitter("batcher", time.Minute, 0, 0).Submit(context.Background(), r.job)
		var ue *errkind.UsageError
		if !errors.As(err, &ue) {
			t.Fatalf("batch submit of a sync shard: %v, want a usage error", err)
		}
		if r.batches() != 0 {
			t.Fatalf("a batch was created")
		}
	})
	t.Run("sync of a batch shard", func(t *testing.T) {
		t.Parallel()
		r := openaiSyncRig(t, 3, rtFaults{})
		r.submitUntilBound(time.Minute, 0, 0)
		d := &lifecycle.Driver{Lake: r.l, Ledger: lake.NewLedger(r.l, "syncer"), Target: r.target, Lease: time.Minute, TmpDir: r.tmp}
		_, err := d.SubmitSync(context.Background(), r.job, lifecycle.SyncOptions{RealTime: r.rt()})
		var ue *errkind.UsageError
		if !errors.As(err, &ue) {
			t.Fatalf("sync of a batch shard: %v, want a usage error", err)
		}
		if p, _ := r.calls(); p != 0 {
			t.Fatalf("%d real-time calls made", p)
		}
	})
}

// TestSyncMaybeSent: a record whose earlier call was recorded without an
// answer (a crash) is sent again as a counted duplicate, or, with
// LeaveMaybeSent, left unsent as a retryable failure.
func TestSyncMaybeSent(t *testing.T) {
	t.Parallel()
	for _, c := range syncRigs {
		for _, leave := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/leave=%v", c.name, leave), func(t *testing.T) {
				t.Parallel()
				testSyncMaybeSent(t, c.make(t, 3, rtFaults{}), leave)
			})
		}
	}
}

func testSyncMaybeSent(t *testing.T, r *syncRig, leave bool) {
	t.Helper()
	// Record 1's first call went out, then the sender died.
	if err := r.l.PutSyncCall(context.Background(), r.job, lake.SyncCall{JobKey: r.job.Hex(), ShardID: r.shard, CustomID: r.id(1), N: 1, Actor: "crashed"}); err != nil {
		t.Fatal(err)
	}
	res := r.send("A", lifecycle.SyncOptions{LeaveMaybeSent: leave})
	sh := res.Shards[0]
	p, _ := r.calls()
	rep := r.reconcile()
	switch {
	case sh.MaybeSent != 1:
		t.Fatalf("shard: %+v", sh)
	case leave && (sh.Left != 1 || p != 2 || rep.Succeeded != 2 || rep.FailedRetryable != 1 || rep.Duplicate != 0 || rep.RetryRecords != 1):
		t.Fatalf("leave: shard %+v, %d calls, report %d succeeded %d retryable %d duplicate", sh, p, rep.Succeeded, rep.FailedRetryable, rep.Duplicate)
	case !leave && (sh.Resent != 1 || p != 3 || rep.Succeeded != 3 || rep.Duplicate != 1):
		t.Fatalf("resend: shard %+v, %d calls, report %d succeeded %d duplicate", sh, p, rep.Succeeded, rep.Duplicate)
	}
}
