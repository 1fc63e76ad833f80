package main

// The sync tail end to end: retry --mode sync as a subprocess against the
// fake OpenAI server's real-time routes, crashed at each durable step.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"path/filepath"
	"testing"
	"time"

	"github.com/batchlake/batchlake/internal/fakeopenai"
	"github.com/batchlake/batchlake/lake/failpoint"
)

// syncRetryOut is what retry prints with --mode sync.
type syncRetryOut struct {
	Mode  string `json:"mode"`
	Child struct {
		JobKey  string `json:"job_key"`
		Records int64  `json:"records"`
	} `json:"child"`
	Sync struct {
		Shards []struct {
			Action     string `json:"action"`
			Answered   int64  `json:"answered"`
			Calls      int64  `json:"calls"`
			MaybeSent  int64  `json:"maybe_sent"`
			Resent     int64  `json:"resent"`
			Unfinished int64  `json:"unfinished"`
		} `json:"shards"`
	} `json:"sync"`
}

// syncParent makes a reconciled parent job of 30 records whose one expired
// batch left 5 records to retry.
func syncParent(t *testing.T, seed uint64, rt fakeopenai.RealTimeFaults) (*harness, string) {
	t.Helper()
	h := newHarness(t, fakeopenai.Options{Seed: seed, Rates: clean, PartialFraction: 0.5, Faults: fakeopenai.Faults{Expire: 1}, RealTime: rt})
	p := h.plan(30, 10)
	h.submitUntilBound(p.JobKey, "1s")
	h.statusUntilTerminal(p.JobKey)
	h.must([]int{0}, lifecycleArgs("collect", p.JobKey)...)
	if rep := h.reconcile(p.JobKey, p.Records); rep.RetryRecords != 5 {
		t.Fatalf("parent: want 5 records to retry, got %s", rep.counts())
	}
	return h, p.JobKey
}

// retrySync runs retry --mode sync until it is not held off by a live
// lease (exit 75) and returns its result.
func (h *harness) retrySync(parent string, extra ...string) syncRetryOut {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := h.must([]int{0, exitTempFail}, append([]string{"retry", "--job", parent, "--mode", "sync", "--lease", "1s"}, extra...)...)
		var out syncRetryOut
		decode(h.t, r, &out)
		if r.code == 0 {
			return out
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("retry --mode sync still held after 30 s: %s", r)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestRetrySyncTail: the retry child goes through chat completions (with a
// rate limit and a server error on the way), reconcile treats its output
// like a batch's, and its cost rows say mode sync at the on-demand price.
func TestRetrySyncTail(t *testing.T) {
	t.Parallel()
	h, parent := syncParent(t, 17, fakeopenai.RealTimeFaults{RateLimited: 1, RetryAfter: "0", ServerError: 1})
	out := h.retrySync(parent)
	if out.Mode != "sync" || out.Child.Records != 5 || len(out.Sync.Shards) != 1 || out.Sync.Shards[0].Answered != 5 || out.Sync.Shards[0].Calls != 7 {
		t.Fatalf("retry --mode sync: %+v", out)
	}
	if n := len(h.srv.RealTimeCalls()); n != 5 {
		t.Fatalf("provider processed %d calls, want 5", n)
	}
	// The child's shard is finished: status and collect have nothing to do.
	h.must([]int{0}, lifecycleArgs("status", out.Child.JobKey)...)
	h.must([]int{0}, lifecycleArgs("collect", out.Child.JobKey)...)
	rep := h.reconcile(out.Child.JobKey, 5)
	if rep.State != "COMPLETED" || rep.Succeeded != 5 || rep.Duplicate != 0 {
		t.Fatalf("child: %s", rep.counts())
	}
	var rows []struct {
		Mode   string `json:"mode"`
		Cost   string `json:"cost"`
		In     int64  `json:"input_tokens"`
		Cached int64  `json:"cached"`
		Out    int64  `json:"output_tokens"`
	}
	h.query(fmt.Sprintf(`SELECT c.mode, CAST(c.cost_usd AS VARCHAR) AS cost, a.input_tokens, a.cached_input_tokens AS cached, a.output_tokens
		FROM costs c JOIN attempts a ON a.job_key = c.job_key AND a.raw_sha256 = c.raw_sha256 AND a.line_no = c.line_no
		WHERE c.job_key = '%s'`, out.Child.JobKey), &rows)
	if len(rows) != 5 {
		t.Fatalf("want 5 cost rows of the child, got %d", len(rows))
	}
	for _, r := range rows {
		// gpt-4o-mini on demand: 0.15 input, 0.075 cached, 0.60 output per
		// million tokens; no batch multiplier (0.5).
		want := new(big.Rat).SetFrac64((r.In-r.Cached)*150+r.Cached*75+r.Out*600, 1_000_000_000)
		got, ok := new(big.Rat).SetString(r.Cost)
		if r.Mode != "sync" || !ok || got.Cmp(want) != 0 {
			t.Errorf("cost row: mode %s cost %s, want sync %s", r.Mode, r.Cost, want.FloatString(18))
		}
	}
	var modes []struct {
		Mode string `json:"mode"`
		N    int64  `json:"n"`
	}
	h.query(fmt.Sprintf(`SELECT mode, count(*) AS n FROM costs WHERE job_key = '%s' GROUP BY ALL`, parent), &modes)
	if len(modes) != 1 || modes[0].Mode != "batch" {
		t.Errorf("parent's cost rows: %+v, want mode batch", modes)
	}
	// cost --by mode shows what the tail cost against the batch.
	var byMode []struct {
		Mode  string `json:"mode"`
		Lines int64  `json:"lines"`
	}
	decode(t, h.must([]int{0}, "cost", "--by", "mode", "--format", "json"), &byMode)
	if len(byMode) != 2 || byMode[0].Mode != "batch" || byMode[1].Mode != "sync" || byMode[1].Lines != 5 {
		t.Errorf("cost --by mode: %+v, want a batch row and a sync row of 5 lines", byMode)
	}
	// Running retry again changes nothing.
	again := h.retrySync(parent)
	if len(again.Sync.Shards) != 0 && again.Sync.Shards[0].Action != "already_sent" {
		t.Errorf("again: %+v", again)
	}
	if n := len(h.srv.RealTimeCalls()); n != 5 {
		t.Errorf("a second retry made %d more calls", n-5)
	}
}

// TestRetrySyncCrash: retry --mode sync killed at each durable step, then
// run again. No record is lost (every one is answered), and every call the
// provider processed beyond one per record is a counted duplicate.
func TestRetrySyncCrash(t *testing.T) {
	for _, fp := range []string{failpoint.SyncAfterSubmitting, failpoint.SyncAfterCall + "@3", failpoint.SyncAfterResult + "@2", failpoint.SyncAfterIngest} {
		t.Run(fp, func(t *testing.T) {
			t.Parallel()
			h, parent := syncParent(t, 17, fakeopenai.RealTimeFaults{})
			h.crash(fp, "retry", "--job", parent, "--mode", "sync", "--lease", "1s")
			out := h.retrySync(parent)
			rep := h.reconcile(out.Child.JobKey, 5)
			processed := int64(len(h.srv.RealTimeCalls()))
			if rep.Missing != 0 || rep.Succeeded != 5 {
				t.Errorf("records lost: %s", rep.counts())
			}
			if extra := processed - 5; extra > rep.Duplicate {
				t.Errorf("provider processed %d calls for 5 records but only %d duplicates are counted", processed, rep.Duplicate)
			}
			if fp == failpoint.SyncAfterCall+"@3" && rep.Duplicate == 0 {
				t.Errorf("a call recorded but unanswered at the crash must count as a possible duplicate: %s", rep.counts())
			}
			if fp == failpoint.SyncAfterIngest && (processed != 5 || rep.Duplicate != 0) {
				t.Errorf("after the answers were kept nothing is sent again: %d calls, %s", processed, rep.counts())
			}
			h.must([]int{0}, "verify")
		})
	}
}

// TestRunSyncTail: the simulator's whole loop with --sync-below: the last,
// small retry generation goes through the real-time API; its cost rows say
// mode sync, every earlier one batch, and the run's records and costs add up.
func TestRunSyncTail(t *testing.T) {
	t.Parallel()
	lk := filepath.Join(t.TempDir(), "lake")
	code, res := cli(t, "run", "--lake", lk, "--provider", "sim", "--input", filepath.Join("..", "..", "testdata", "demo", "requests.jsonl"),
		"--tenant", "acme", "--prompt-version", "v1", "--shard-max-records", "100", "--poll", "1ms", "--progress", "never", "--sync-below", "20")
	if code != exitOK {
		t.Fatalf("run: exit %d %v", code, res)
	}
	gens := res["generations"].([]any)
	if len(gens) < 2 {
		t.Fatalf("run made %d generations: nothing to send synchronously", len(gens))
	}
	var out bytes.Buffer
	if code := run([]string{"sql", "--lake", lk, "--format", "json",
		"SELECT m.attempt AS attempt, any_value(m.expected_records) AS records, string_agg(DISTINCT c.mode, ',') AS modes FROM manifests m JOIN costs c USING (job_key) GROUP BY ALL ORDER BY m.attempt"}, &out, io.Discard); code != exitOK {
		t.Fatalf("sql: exit %d", code)
	}
	var byAttempt []struct {
		Attempt int64  `json:"attempt"`
		Records int64  `json:"records"`
		Modes   string `json:"modes"`
	}
	if err := json.Unmarshal(out.Bytes(), &byAttempt); err != nil {
		t.Fatalf("sql: %v: %s", err, out.String())
	}
	if len(byAttempt) != len(gens) {
		t.Fatalf("cost rows of %d generations, run made %d: %+v", len(byAttempt), len(gens), byAttempt)
	}
	for _, a := range byAttempt {
		want := "batch"
		if a.Attempt > 1 && a.Records < 20 {
			want = "sync"
		}
		if a.Modes != want {
			t.Errorf("attempt %d (%d records): cost rows of mode %q, want %s", a.Attempt, a.Records, a.Modes, want)
		}
	}
	if last := byAttempt[len(byAttempt)-1]; last.Modes != "sync" {
		t.Errorf("the last generation (%d records) did not run synchronously", last.Records)
	}
}
