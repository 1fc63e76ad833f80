package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/internal/fakeopenai"
)

// clean makes the simulated provider answer every request well, so a test
// can predict each count of the report from the fault it injects alone.
var clean = &fakeopenai.Rates{}

// TestCreateFaults: error answers on create. An error after the batch was
// made (5xx, 429) or no answer leaves the outcome unknown: the shard stays
// SUBMITTING, and the next submit looks the batch up and binds it instead of
// creating another. A definite refusal (4xx) creates nothing and releases
// the lease, so the next submit creates at once.
func TestCreateFaults(t *testing.T) {
	for _, c := range []struct {
		name    string
		faults  fakeopenai.Faults
		lease   string
		exit    int // the first submit's exit code
		creates int // creates the provider receives in all
		action  string
	}{
		{"500 after creating", fakeopenai.Faults{CreateErrorAfter: 1, CreateStatus: 500}, "1s", exitTempFail, 3, "found"},
		{"429 after creating", fakeopenai.Faults{CreateErrorAfter: 1, CreateStatus: 429}, "1s", exitTempFail, 3, "found"},
		{"response lost", fakeopenai.Faults{CreateLost: 1}, "1s", exitTempFail, 3, "found"},
		{"503 refused", fakeopenai.Faults{CreateRefused: 1, CreateStatus: 503}, "1s", exitTempFail, 4, "created"},
		{"429 refused", fakeopenai.Faults{CreateRefused: 1, CreateStatus: 429}, "1s", exitTempFail, 4, "created"},
		// The gateway quotes the key in its error: it must not reach the
		// output or the ledger's error detail (checked at cleanup).
		{"400 refused quoting the key", fakeopenai.Faults{CreateRefused: 1, CreateStatus: 400, LeakKey: true}, "1h", exitError, 4, "created"},
		{"uploads refused past the SDK's retries", fakeopenai.Faults{UploadRefused: 3, UploadStatus: 500}, "1h", exitError, 3, "created"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, fakeopenai.Options{Seed: 11, Rates: clean, Faults: c.faults})
			p := h.plan(9, 3)
			first := h.run(lifecycleArgs("submit", p.JobKey, "--lease", c.lease)...)
			if first.code != c.exit || first.killed {
				t.Fatalf("first submit: want exit %d, got %s", c.exit, first)
			}
			if c.faults.LeakKey && !strings.Contains(first.stderr, "[redacted]") {
				t.Errorf("the server quoted the key, but the error does not show it redacted: %s", first.stderr)
			}
			// A 1h lease proves a definite failure released it: the next run
			// must not wait. An unknown outcome keeps it until it expires.
			tempfails, last := h.submitUntilBound(p.JobKey, c.lease)
			if c.exit == exitError && tempfails > 0 {
				t.Errorf("after a definite failure submit exited 75 %d times: the lease was not released", tempfails)
			}
			if f := h.srv.Faults(); f.CreateErrorAfter+f.CreateLost+f.CreateRefused+f.UploadRefused != 0 {
				t.Fatalf("faults left unused: %+v", f)
			}
			if got := h.creates(); got != c.creates {
				t.Errorf("provider received %d creates, want %d", got, c.creates)
			}
			if a := actions(last)[p.Shards[0].ShardID]; a != c.action {
				t.Errorf("faulted shard: rerun action %q, want %q", a, c.action)
			}
			h.assertOneBatchPerShard(p)
			rep := h.finish(p)
			if rep.Succeeded != p.Records {
				t.Errorf("clean provider, yet %s", rep.counts())
			}
		})
	}
}

// TestBatchFailedValidation: a batch failed at validation produces no
// result; its records count as missing and go to the retry shard, which
// becomes a child job that is submitted and completes.
func TestBatchFailedValidation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeopenai.Options{Seed: 13, Rates: clean, RetryRates: clean, Faults: fakeopenai.Faults{FailValidation: 1}})
	p := h.plan(9, 3)
	h.submitUntilBound(p.JobKey, "1s")
	st := h.statusUntilTerminal(p.JobKey)
	failed := p.Shards[0]
	states := map[string]string{}
	for _, s := range st.Shards {
		states[s.ShardID] = s.State
	}
	if states[failed.ShardID] != "FAILED" {
		t.Fatalf("shard %s: state %q, want FAILED: %+v", failed.ShardID, states[failed.ShardID], st.Shards)
	}
	r := h.must([]int{0}, lifecycleArgs("collect", p.JobKey)...)
	var col stepOut
	decode(t, r, &col)
	if a := actions(col)[failed.ShardID]; a != "no_results" {
		t.Errorf("collect: failed shard %s, want no_results", a)
	}
	rep := h.reconcile(p.JobKey, p.Records)
	if rep.Missing != failed.Records || rep.Succeeded != p.Records-failed.Records || rep.RetryRecords != failed.Records || len(rep.RetryShards) == 0 {
		t.Fatalf("want the failed shard's %d records missing and to retry, got %s", failed.Records, rep.counts())
	}

	r = h.must([]int{0}, "retry", "--job", p.JobKey)
	var rr struct {
		Child *planOut `json:"child"`
	}
	decode(t, r, &rr)
	if rr.Child == nil || rr.Child.Records != failed.Records {
		t.Fatalf("retry: want a child job of %d records: %s", failed.Records, r)
	}
	child := *rr.Child
	h.submitUntilBound(child.JobKey, "1s")
	if rep := h.finish(child); rep.State != "COMPLETED" || rep.Succeeded != failed.Records {
		t.Errorf("child job: %s", rep.counts())
	}
	if got := h.creates(); got != len(p.Shards)+len(child.Shards) {
		t.Errorf("%d creates for %d + %d shards", got, len(p.Shards), len(child.Shards))
	}
}

// TestExpiredAndCancelledKeepFinishedLines: an expired batch and a
// cancelled one surrender the lines that finished; the rest are retryable.
func TestExpiredAndCancelledKeepFinishedLines(t *testing.T) {
	t.Run("expired", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, fakeopenai.Options{Seed: 17, Rates: clean, PartialFraction: 0.5, Faults: fakeopenai.Faults{Expire: 1}})
		p := h.plan(30, 10)
		h.submitUntilBound(p.JobKey, "1s")
		st := h.statusUntilTerminal(p.JobKey)
		expired := 0
		for _, s := range st.Shards {
			if s.State == "EXPIRED" {
				expired++
			}
		}
		if expired != 1 {
			t.Fatalf("want one EXPIRED shard: %+v", st.Shards)
		}
		h.must([]int{0}, lifecycleArgs("collect", p.JobKey)...)
		rep := h.reconcile(p.JobKey, p.Records)
		// 10 records expired half-way: 5 finished, 5 batch_expired.
		if rep.Succeeded != 25 || rep.FailedRetryable != 5 || rep.Missing != 0 || rep.RetryRecords != 5 {
			t.Errorf("want 25 succeeded and 5 retryable, got %s", rep.counts())
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, fakeopenai.Options{Seed: 19, Rates: clean, PartialFraction: 0.5})
		p := h.plan(30, 10)
		h.submitUntilBound(p.JobKey, "1s")
		// One poll moves every batch from validating to in_progress.
		h.must([]int{exitTempFail}, lifecycleArgs("status", p.JobKey)...)
		r := h.must([]int{0}, lifecycleArgs("cancel", p.JobKey)...)
		var c stepOut
		decode(t, r, &c)
		for _, s := range c.Shards {
			if s.Action != "cancel_requested" {
				t.Errorf("cancel: shard %s %s", s.ShardID, s.Action)
			}
		}
		st := h.statusUntilTerminal(p.JobKey)
		for _, s := range st.Shards {
			if s.State != "CANCELLED" {
				t.Errorf("shard %s: %s, want CANCELLED", s.ShardID, s.State)
			}
		}
		h.must([]int{0}, lifecycleArgs("collect", p.JobKey)...)
		rep := h.reconcile(p.JobKey, p.Records)
		if rep.Succeeded != 15 || rep.FailedRetryable != 15 || rep.Missing != 0 || rep.RetryRecords != 15 {
			t.Errorf("want half of each shard kept (15) and 15 retryable, got %s", rep.counts())
		}
	})
}

// TestOutputGoneWhenCollectedLate: result files deleted by the provider's
// retention before collect. Collect says so and succeeds, the records count
// as missing (and are retried), nothing crashes.
func TestOutputGoneWhenCollectedLate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeopenai.Options{Seed: 23, Rates: clean})
	p := h.plan(9, 3)
	h.submitUntilBound(p.JobKey, "1s")
	h.statusUntilTerminal(p.JobKey)
	h.srv.UpdateFaults(func(f *fakeopenai.Faults) { f.FilesGone = true })
	for range 2 {
		r := h.must([]int{0}, lifecycleArgs("collect", p.JobKey)...)
		var s stepOut
		decode(t, r, &s)
		for _, sh := range s.Shards {
			if !strings.Contains(sh.Detail, "gone") {
				t.Errorf("collect: shard %s detail %q does not report the file gone", sh.ShardID, sh.Detail)
			}
		}
	}
	rep := h.reconcile(p.JobKey, p.Records)
	if rep.Missing != p.Records || rep.RetryRecords != p.Records {
		t.Errorf("want every record missing and to retry, got %s", rep.counts())
	}
}

// TestSecretsCheckFindsLeaks proves the check every harness runs at cleanup
// would see a leaked key in an output or a lake file.
func TestSecretsCheckFindsLeaks(t *testing.T) {
	key := secretKey(t)
	dir := t.TempDir()
	if leaks, files, err := findSecret(key, [][]byte{[]byte("nothing here")}, dir); err != nil || len(leaks) != 0 || files != 0 {
		t.Fatalf("empty lake: leaks %v files %d err %v", leaks, files, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "ledger", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ledger", "x", "000001.json"), []byte(`{"detail":{"error":"key `+key+`"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	leaks, files, err := findSecret(key, [][]byte{[]byte("ok"), []byte("Bearer " + key)}, dir)
	if err != nil || files != 1 || len(leaks) != 2 {
		t.Errorf("want 2 leaks (one output, one file) in 1 file, got %v, %d files, %v", leaks, files, err)
	}
}
