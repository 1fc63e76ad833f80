package lifecycle_test

// Gemini's whole batch flow (submit → status → collect → reconcile, and
// expiry and cancel) through the real adapter against fakegemini. These end
// in reconcile, so they live here (this package links DuckDB already) rather
// than in providers/geminibatch, whose tests then need no DuckDB.

import (
	"bytes"
	"context"
	"fmt"
	"math/big"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/fakegemini"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lifecycle"
	"github.com/batchlake/batchlake/providers/geminibatch"
	"github.com/batchlake/batchlake/reconcile"
)

// geminiFlow is a lake, a fake Gemini over loopback HTTP, the real adapter
// and a lifecycle driver using it.
type geminiFlow struct {
	l   *lake.Lake
	drv *lifecycle.Driver
	tmp string
}

func newGeminiFlow(t *testing.T, opts fakegemini.Options, inlineMax int64) *geminiFlow {
	t.Helper()
	const key = "AIzaTEST0123456789abcdefSECRETkey"
	opts.APIKey = key
	srv := fakegemini.New(opts)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	srv.SetBaseURL(hs.URL)
	l, tmp := newLake(t)
	c, err := geminibatch.New(geminibatch.Config{APIKey: key, BaseURL: hs.URL, RequestTimeout: 5 * time.Second, CreateTimeout: 5 * time.Second,
		PageSize: 2, InlineMaxBytes: inlineMax, Jobs: lifecycle.LakeShards{Lake: l}})
	if err != nil {
		t.Fatal(err)
	}
	drv := &lifecycle.Driver{Lake: l, Ledger: lake.NewLedger(l, "tester"), Client: c, Target: "gemini", Lease: time.Minute, TmpDir: tmp}
	return &geminiFlow{l: l, drv: drv, tmp: tmp}
}

// plan writes n Gemini requests r-000… and plans them in shards of per.
func (e *geminiFlow) plan(t *testing.T, n, per int) lake.Digest {
	t.Helper()
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"key":"r-%03d","request":{"contents":[{"parts":[{"text":"question %d"}]}],"generation_config":{"temperature":0.2}}}`+"\n", i, i)
	}
	in := filepath.Join(e.tmp, fmt.Sprintf("in-%d-%d.jsonl", n, per))
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	res := must(ingest.Plan(context.Background(), e.l, ingest.PlanOptions{Provider: "gemini", Model: "gemini-2.5-flash", Input: in, Tenant: "acme", PromptVersion: "v1", ShardMaxRecords: per, TmpDir: e.tmp}))
	return must(lake.ParseDigest(res.JobKey))
}

func geminiOutcome(key string) string {
	switch key {
	case "r-001":
		return fakegemini.Internal
	case "r-002":
		return fakegemini.Invalid
	case "r-003":
		return fakegemini.Blocked
	case "r-005":
		return fakegemini.Exhausted
	}
	return fakegemini.OK
}

// TestGeminiSubmitStatusCollectReconcile: the whole flow, with the input
// uploaded as a file and sent inline, with an exact report.
func TestGeminiSubmitStatusCollectReconcile(t *testing.T) {
	t.Parallel()
	for _, inline := range []int64{0, 1 << 20} {
		t.Run(fmt.Sprintf("inline_max=%d", inline), func(t *testing.T) {
			t.Parallel()
			e := newGeminiFlow(t, fakegemini.Options{Outcome: geminiOutcome}, inline)
			ctx := context.Background()
			job := e.plan(t, 8, 4)
			must(e.drv.Submit(ctx, job))
			if st := must(e.drv.Status(ctx, job)); !st.Pending || st.Shards[0].ProviderStatus != "in_progress" {
				t.Fatalf("first status: %+v", st.Shards)
			}
			st := must(e.drv.Status(ctx, job))
			if st.Pending || st.Shards[0].ProviderStatus != "completed" {
				t.Fatalf("second status: %+v", st.Shards)
			}
			if got := actions(must(e.drv.Collect(ctx, job))); got != "part-00000:collected part-00001:collected" {
				t.Fatalf("collect: %s", got)
			}
			rep := must(reconcile.Run(ctx, e.l, reconcile.Options{JobKey: job.Hex(), MaxAttempts: 3, TmpDir: e.tmp}))
			want := fmt.Sprintf("expected=8 succeeded=4 failed_retryable=2 failed_permanent=1 quality_failed=1 missing=0 unknown=0 duplicate=0 quarantined=0 closed=true retry=3 state=%s", lake.Partial)
			if got := reportLine(rep); got != want {
				t.Fatalf("report:\n got %s\nwant %s", got, want)
			}
			// Four successes: input 10+5 tokens, output 5, at gemini-2.5-flash's
			// $0.30/$2.50 per Mtok, batch 0.5.
			wantFirstSuccess(t, rep, new(big.Rat).SetFrac64(4*(15*30+5*250), 200_000_000))
		})
	}
}

// TestGeminiExpiredAndCancelledLeaveRecordsMissing: an expired batch and a
// cancelled one have no results; their records are missing and retried.
func TestGeminiExpiredAndCancelledLeaveRecordsMissing(t *testing.T) {
	t.Parallel()
	e := newGeminiFlow(t, fakegemini.Options{Faults: fakegemini.Faults{Expire: 1}, PollsPerStep: 1}, 0)
	ctx := context.Background()
	job := e.plan(t, 4, 2)
	must(e.drv.Submit(ctx, job))
	must(e.drv.Status(ctx, job)) // shard 0 expires on its first poll, shard 1 runs
	c := must(e.drv.Cancel(ctx, job))
	if got := actions(c); got != "part-00000:nothing_to_cancel part-00001:cancel_requested" {
		t.Fatalf("cancel: %s", got)
	}
	st := must(e.drv.Status(ctx, job))
	if st.Pending || st.Shards[0].State != lake.Expired || st.Shards[1].State != lake.Cancelled {
		t.Fatalf("status: %+v", st.Shards)
	}
	if got := actions(must(e.drv.Collect(ctx, job))); got != "part-00000:no_results part-00001:no_results" {
		t.Fatalf("collect: %s", got)
	}
	rep := must(reconcile.Run(ctx, e.l, reconcile.Options{JobKey: job.Hex(), MaxAttempts: 3, TmpDir: e.tmp}))
	if rep.Missing != 4 || rep.RetryRecords != 4 {
		t.Fatalf("report: missing %d retry %d", rep.Missing, rep.RetryRecords)
	}
}
