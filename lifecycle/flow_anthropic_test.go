package lifecycle_test

// Anthropic's whole batch flow (submit → status → collect → reconcile, and
// cancel) through the real adapter against fakeanthropic. These end in
// reconcile, so they live here (this package links DuckDB already) rather
// than in providers/anthropicbatch, whose tests then need no DuckDB.

import (
	"bytes"
	"context"
	"fmt"
	"math/big"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/fakeanthropic"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lifecycle"
	"github.com/batchlake/batchlake/providers/anthropicbatch"
	"github.com/batchlake/batchlake/reconcile"
)

// anthropicFlow is a lake, a fake Anthropic over loopback HTTP, the real
// adapter and a lifecycle driver using it.
type anthropicFlow struct {
	srv *fakeanthropic.Server
	c   *anthropicbatch.Client
	l   *lake.Lake
	drv *lifecycle.Driver
	tmp string
}

func newAnthropicFlow(t *testing.T, opts fakeanthropic.Options) *anthropicFlow {
	t.Helper()
	const key = "sk-ant-api03-TEST0123456789abcdefSECRET"
	now := time.Now().UTC() // the fake's clock stands still
	opts.APIKey = key
	opts.Now = func() time.Time { return now }
	srv := fakeanthropic.New(opts)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	srv.SetBaseURL(hs.URL)
	l, tmp := newLake(t)
	c, err := anthropicbatch.New(anthropicbatch.Config{
		APIKey: key, BaseURL: hs.URL, RequestTimeout: 5 * time.Second, CreateTimeout: 5 * time.Second,
		PageSize: 2, Shards: lifecycle.LakeShards{Lake: l}, TmpDir: tmp,
	})
	if err != nil {
		t.Fatal(err)
	}
	drv := &lifecycle.Driver{Lake: l, Ledger: lake.NewLedger(l, "tester"), Client: c, Target: "anthropic", Lease: time.Minute, TmpDir: tmp}
	return &anthropicFlow{srv: srv, c: c, l: l, drv: drv, tmp: tmp}
}

// plan writes n Anthropic requests r-000… and plans them in shards of per.
func (e *anthropicFlow) plan(t *testing.T, n, per int) lake.Digest {
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

// must fails the test (by panicking: a test failure with its stack) on err.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// actions is "shard:action" for every shard of r.
func actions(r *lifecycle.Result) string {
	var a []string
	for _, s := range r.Shards {
		a = append(a, s.ShardID+":"+s.Action)
	}
	return strings.Join(a, " ")
}

// reportLine is a report's counts on one line, to compare exactly.
func reportLine(rep *reconcile.Report) string {
	return fmt.Sprintf("expected=%d succeeded=%d failed_retryable=%d failed_permanent=%d quality_failed=%d missing=%d unknown=%d duplicate=%d quarantined=%d closed=%v retry=%d state=%s",
		rep.Expected, rep.Succeeded, rep.FailedRetryable, rep.FailedPermanent, rep.QualityFailed, rep.Missing, rep.Unknown, rep.Duplicate, rep.Quarantined, rep.Closed, rep.RetryRecords, rep.State)
}

// wantFirstSuccess fails the test unless the report's first_success cost is
// exactly want.
func wantFirstSuccess(t *testing.T, rep *reconcile.Report, want *big.Rat) {
	t.Helper()
	got, ok := new(big.Rat).SetString(rep.CostUSD["first_success"].String())
	if !ok || got.Cmp(want) != 0 {
		t.Fatalf("first_success cost %v, want %s", rep.CostUSD["first_success"], want.FloatString(9))
	}
}

func anthropicOutcome(id string) string {
	switch id {
	case "r-001", "r-005":
		return fakeanthropic.Errored
	case "r-002":
		return fakeanthropic.Invalid
	case "r-003":
		return fakeanthropic.Expired
	}
	return fakeanthropic.Succeeded
}

// TestAnthropicSubmitStatusCollectReconcile: the whole flow against the
// fake, with an exact report.
func TestAnthropicSubmitStatusCollectReconcile(t *testing.T) {
	t.Parallel()
	e := newAnthropicFlow(t, fakeanthropic.Options{PollsPerStep: 2, Outcome: anthropicOutcome})
	ctx := context.Background()
	job := e.plan(t, 8, 4)
	must(e.drv.Submit(ctx, job))
	st := must(e.drv.Status(ctx, job))
	if !st.Pending {
		t.Fatalf("status after one poll: not pending")
	}
	st = must(e.drv.Status(ctx, job))
	if st.Pending {
		t.Fatalf("status after two polls: pending %+v", st.Shards)
	}
	// r-003 expired in shard 0: that batch is "expired", shard 1's completed.
	if st.Shards[0].ProviderStatus != "expired" || st.Shards[1].ProviderStatus != "completed" {
		t.Fatalf("provider statuses: %+v", st.Shards)
	}
	col := must(e.drv.Collect(ctx, job))
	if got := actions(col); got != "part-00000:collected part-00001:collected" {
		t.Fatalf("collect: %s", got)
	}
	if got := actions(must(e.drv.Collect(ctx, job))); got != "part-00000:already_collected part-00001:already_collected" {
		t.Fatalf("collect again: %s", got)
	}
	rep := must(reconcile.Run(ctx, e.l, reconcile.Options{JobKey: job.Hex(), MaxAttempts: 3, TmpDir: e.tmp}))
	want := fmt.Sprintf("expected=8 succeeded=4 failed_retryable=3 failed_permanent=1 quality_failed=0 missing=0 unknown=0 duplicate=0 quarantined=0 closed=true retry=3 state=%s", lake.Partial)
	if got := reportLine(rep); got != want {
		t.Fatalf("report:\n got %s\nwant %s", got, want)
	}
	// Four successes r-000, r-004, r-006, r-007: input 10+5 tokens, output 5,
	// at claude-sonnet-4-6's $3/$15 per Mtok, batch 0.5.
	wantFirstSuccess(t, rep, new(big.Rat).SetFrac64(4*(15*3+5*15), 2_000_000))
	if len(rep.Files.Output) != 2 {
		t.Fatalf("report files: %+v", rep.Files)
	}
}

// TestAnthropicCancelKeepsFinishedResults: a cancelled batch's finished
// requests are collected and count; the rest are canceled (retryable).
func TestAnthropicCancelKeepsFinishedResults(t *testing.T) {
	t.Parallel()
	e := newAnthropicFlow(t, fakeanthropic.Options{PollsPerStep: 100, Outcome: anthropicOutcome})
	ctx := context.Background()
	job := e.plan(t, 8, 8)
	must(e.drv.Submit(ctx, job))
	c := must(e.drv.Cancel(ctx, job))
	if c.Shards[0].Action != "cancel_requested" || c.Shards[0].ProviderStatus != "cancelling" {
		t.Fatalf("cancel: %+v", c.Shards)
	}
	e.srv.UpdateFaults(func(*fakeanthropic.Faults) {})
	for range 100 {
		must(e.c.Get(ctx, e.srv.Batches()[0]))
	}
	st := must(e.drv.Status(ctx, job))
	if st.Pending || st.Shards[0].State != lake.Cancelled {
		t.Fatalf("status after cancel: %+v", st.Shards)
	}
	must(e.drv.Collect(ctx, job))
	rep := must(reconcile.Run(ctx, e.l, reconcile.Options{JobKey: job.Hex(), MaxAttempts: 3, TmpDir: e.tmp}))
	// Successes stay; every other request was canceled (retryable).
	if rep.Succeeded != 4 || rep.FailedRetryable != 4 || rep.Missing != 0 || !rep.Closed {
		t.Fatalf("report after cancel: %+v", rep)
	}
}
