package main

import (
	"strings"
	"testing"

	"github.com/batchlake/batchlake/internal/fakeopenai"
	"github.com/batchlake/batchlake/lake/failpoint"
)

// TestCrashMatrix kills batchlake with SIGKILL at every failpoint of submit
// and collect, runs the step again, and proves the outcome identical to an
// uninterrupted run of the same job: one provider batch per shard, bound in
// the lake, and the same report and attempt rows (no line lost or ingested
// twice).
func TestCrashMatrix(t *testing.T) {
	const n, per, seed = 30, 10, 7
	base := newHarness(t, fakeopenai.Options{Seed: seed})
	bp := base.plan(n, per)
	base.submitUntilBound(bp.JobKey, "1s")
	want := base.finish(bp)
	wantRows := base.attemptRows(bp.JobKey)
	if wantRows < int64(n) || want.Duplicate+want.Unknown == 0 {
		// The comparison is only sharp if the provider's output has
		// defects (duplicate or unknown lines) a botched re-ingest would change.
		t.Fatalf("baseline too clean to compare with: %d rows, %s", wantRows, want.counts())
	}

	same := func(h *harness, p planOut, got report) {
		t.Helper()
		if got.counts() != want.counts() {
			h.t.Errorf("report differs from the uninterrupted run:\n got %s\nwant %s", got.counts(), want.counts())
		}
		if len(got.Files.Output) != len(want.Files.Output) || len(got.Files.Error) != len(want.Files.Error) {
			h.t.Errorf("reconciled %d output and %d error files, uninterrupted run %d and %d",
				len(got.Files.Output), len(got.Files.Error), len(want.Files.Output), len(want.Files.Error))
		}
		if rows := h.attemptRows(p.JobKey); rows != wantRows {
			h.t.Errorf("%d attempt rows, uninterrupted run %d: result lines lost or ingested twice", rows, wantRows)
		}
		// Whatever the crash left behind, the lake is consistent.
		if r := h.run("verify"); r.code != 0 {
			h.t.Errorf("verify after the crash: %s", r)
		}
	}

	for _, c := range []struct {
		fp    string
		shard int  // the shard (1-based) being submitted when killed
		held  bool // the crash left a SUBMITTING lease: the next run waits it out
		found bool // the crash left an unbound batch: the next run must find it
	}{
		{failpoint.SubmitBeforeSubmitting, 1, false, false},
		{failpoint.SubmitBeforeSubmitting + "@2", 2, false, false},
		{failpoint.SubmitAfterSubmitting, 1, true, false},
		{failpoint.SubmitAfterSubmitting + "@3", 3, true, false},
		{failpoint.SubmitAfterCreate, 1, true, true},
		{failpoint.SubmitAfterCreate + "@2", 2, true, true},
	} {
		t.Run(c.fp, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, fakeopenai.Options{Seed: seed})
			p := h.plan(n, per)
			crashed := p.Shards[c.shard-1].ShardID
			// The lease must outlive the rerun's start on a loaded 2-core
			// machine, or the rerun would (rightly) take it over at once.
			h.crash(c.fp, lifecycleArgs("submit", p.JobKey, "--lease", "6s")...)
			wantCreates := c.shard - 1
			if c.found {
				wantCreates++
			}
			if got := h.creates(); got != wantCreates {
				t.Fatalf("killed at %s: provider received %d creates, want %d:%s", c.fp, got, wantCreates, h.createCalls())
			}

			tempfails, last := h.submitUntilBound(p.JobKey, "6s")
			if held := tempfails > 0; held != c.held {
				t.Errorf("after the crash submit exited 75 %d times; want a wait for the lease: %v", tempfails, c.held)
			}
			if got := h.creates(); got != len(p.Shards) {
				t.Errorf("provider received %d creates for %d shards:%s", got, len(p.Shards), h.createCalls())
			}
			act := actions(last)
			if (act[crashed] == "found") != c.found {
				t.Errorf("shard %s: rerun action %q, want found=%v (all: %v)", crashed, act[crashed], c.found, act)
			}
			h.assertOneBatchPerShard(p)
			// One SUBMITTING per run that got past the ledger write, and one
			// lease proof right before the shard's only create.
			submitting := strings.Count(strings.Join(h.ledgerStates(p.JobKey, crashed), " "), "SUBMITTING")
			if wantN := map[bool]int{false: 2, true: 3}[c.held]; submitting != wantN {
				t.Errorf("shard %s: %d SUBMITTING events, want %d: %v", crashed, submitting, wantN, h.ledgerStates(p.JobKey, crashed))
			}
			same(h, p, h.finish(p))
		})
	}

	// Shards submitted side by side (--parallel): killed while several are
	// in the protocol at once, the job still ends with one batch per shard,
	// each create made once, and the same report.
	for _, fp := range []string{
		failpoint.SubmitAfterSubmitting + "@2",
		failpoint.SubmitAfterCreate + "@2",
	} {
		t.Run("parallel/"+fp, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, fakeopenai.Options{Seed: seed})
			p := h.plan(n, per)
			h.crash(fp, lifecycleArgs("submit", p.JobKey, "--lease", "6s", "--parallel", "3")...)
			if got := h.creates(); got > len(p.Shards) {
				t.Fatalf("killed at %s: provider received %d creates for %d shards:%s", fp, got, len(p.Shards), h.createCalls())
			}
			h.submitUntilBound(p.JobKey, "6s")
			if got := h.creates(); got != len(p.Shards) {
				t.Errorf("provider received %d creates for %d shards:%s", got, len(p.Shards), h.createCalls())
			}
			h.assertOneBatchPerShard(p)
			same(h, p, h.finish(p))
		})
	}

	for _, fp := range []string{
		failpoint.CollectAfterDownload,
		failpoint.CollectAfterDownload + "@4",
		failpoint.CollectAfterIngest,
		failpoint.CollectAfterIngest + "@3",
	} {
		t.Run(fp, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, fakeopenai.Options{Seed: seed})
			p := h.plan(n, per)
			h.submitUntilBound(p.JobKey, "1s")
			h.statusUntilTerminal(p.JobKey)
			h.crash(fp, lifecycleArgs("collect", p.JobKey)...)
			h.must([]int{0}, lifecycleArgs("collect", p.JobKey)...)
			// Collect once more: nothing left to do, nothing written.
			r := h.must([]int{0}, lifecycleArgs("collect", p.JobKey)...)
			var s stepOut
			decode(t, r, &s)
			for _, sh := range s.Shards {
				if sh.Action != "already_collected" {
					t.Errorf("third collect: shard %s %s, want already_collected", sh.ShardID, sh.Action)
				}
			}
			same(h, p, h.reconcile(p.JobKey, p.Records))
			h.assertOneBatchPerShard(p)
		})
	}
}
