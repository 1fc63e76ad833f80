package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batchlake/batchlake/internal/fakeopenai"
)

// TestLostCreatesEndWithOneBatchPerShard proves submit's promise: a job of
// three shards submitted against a server that drops the first two create
// responses ends with exactly three provider batches and a report that
// accounts for every record.
func TestLostCreatesEndWithOneBatchPerShard(t *testing.T) {
	h := newHarness(t, fakeopenai.Options{Seed: 7, Faults: fakeopenai.Faults{CreateLost: 2}})
	p := h.plan(30, 10)

	tempfails, _ := h.submitUntilBound(p.JobKey, "1s")
	if tempfails == 0 {
		t.Errorf("submit exited 0 at once, but two create responses were lost: want 75 first")
	}
	if got := h.srv.Faults().CreateLost; got != 0 {
		t.Fatalf("%d lost creates left unused: the fault never fired", got)
	}
	if got := h.creates(); got != 3 {
		t.Errorf("provider received %d creates, want 3 (lost ones looked up, never re-sent)", got)
	}
	h.assertOneBatchPerShard(p)

	h.statusUntilTerminal(p.JobKey)
	h.must([]int{0}, lifecycleArgs("collect", p.JobKey)...)
	rep := h.reconcile(p.JobKey, p.Records)
	t.Logf("submit ran %d times with exit 75 first; report %s", tempfails, rep.counts())
	if rep.Succeeded == 0 || len(rep.Files.Output) != 3 {
		t.Errorf("want successes from three output files, got %s files %v", rep.counts(), rep.Files.Output)
	}
	h.assertOneBatchPerShard(p)

	// Idempotent afterwards: every step run again after reconcile succeeds
	// and changes nothing; submit creates nothing.
	r := h.must([]int{0}, lifecycleArgs("submit", p.JobKey, "--lease", "1s")...)
	if strings.Contains(r.stdout, `"created"`) || h.creates() != 3 {
		t.Errorf("submit after the job ran created again: %s", r)
	}
	h.must([]int{0}, lifecycleArgs("status", p.JobKey)...)
	r = h.must([]int{0}, lifecycleArgs("collect", p.JobKey)...)
	var c stepOut
	decode(t, r, &c)
	for _, s := range c.Shards {
		if s.Action != "already_collected" {
			t.Errorf("collect after reconcile: shard %s %s, want already_collected", s.ShardID, s.Action)
		}
	}
	if again := h.reconcile(p.JobKey, p.Records); again.counts() != rep.counts() {
		t.Errorf("reconcile again: %s, first %s", again.counts(), rep.counts())
	}
}

// TestSubmitAgainCreatesNothing runs submit two and three times in a row:
// the later runs find every shard bound and call create no more.
func TestSubmitAgainCreatesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeopenai.Options{Seed: 3})
	p := h.plan(9, 3)
	for run := 1; run <= 3; run++ {
		r := h.must([]int{0}, lifecycleArgs("submit", p.JobKey, "--lease", "1m")...)
		var s stepOut
		decode(t, r, &s)
		want := "created"
		if run > 1 {
			want = "already_bound"
		}
		for _, sh := range s.Shards {
			if sh.Action != want || sh.ProviderJobID == "" {
				t.Errorf("run %d: shard %s action %q batch %q, want %s with a batch id", run, sh.ShardID, sh.Action, sh.ProviderJobID, want)
			}
		}
		if got := h.creates(); got != len(p.Shards) {
			t.Errorf("after run %d: %d creates, want %d", run, got, len(p.Shards))
		}
	}
	h.assertOneBatchPerShard(p)
}

// TestConcurrentSubmitters starts several submit processes on the same job
// at the same instant: the ledger's conditional appends and leases let one
// of them bind each shard; the others step back (exit 75) and a later run
// finds every shard bound.
func TestConcurrentSubmitters(t *testing.T) {
	for _, procs := range []int{2, 2, 3} {
		t.Run(fmt.Sprintf("%d processes", procs), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, fakeopenai.Options{Seed: 5})
			p := h.plan(12, 3)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			type started struct {
				cmd            *exec.Cmd
				stdout, stderr *bytes.Buffer
				args           []string
			}
			var all []started
			args := lifecycleArgs("submit", p.JobKey, "--lease", "1m")
			for range procs {
				cmd, o, e := h.start(ctx, nil, args...)
				all = append(all, started{cmd, o, e, args})
			}
			bound := map[string]int{}
			for _, s := range all {
				r := h.wait(s.cmd, s.stdout, s.stderr, s.args)
				if r.code != 0 && r.code != exitTempFail {
					t.Fatalf("concurrent submit: %s", r)
				}
				var out stepOut
				decode(t, r, &out)
				t.Logf("concurrent submit exit %d: %v", r.code, actions(out))
				for _, sh := range out.Shards {
					if sh.Action == "created" || sh.Action == "found" {
						bound[sh.ShardID]++
					}
				}
			}
			for _, s := range p.Shards {
				if bound[s.ShardID] != 1 {
					t.Errorf("shard %s bound by %d of the concurrent runs, want exactly 1", s.ShardID, bound[s.ShardID])
				}
			}
			// Every shard is bound now, so one more run succeeds at once.
			if tempfails, _ := h.submitUntilBound(p.JobKey, "1m"); tempfails != 0 {
				t.Errorf("submit after the concurrent runs exited 75 %d times", tempfails)
			}
			if got := h.creates(); got != len(p.Shards) {
				t.Errorf("%d creates for %d shards", got, len(p.Shards))
			}
			h.assertOneBatchPerShard(p)
		})
	}
}

// TestLeaseRunsOutDuringSlowCreate: a live submitter whose create would
// answer after its lease ran out. The create is cut at the lease's deadline
// (its outcome is unknown: the batch was made), the submitter releases the
// shard with a settle time and exits 75; a second submitter after the settle
// finds the batch the slow create made and binds it. One batch per shard.
func TestLeaseRunsOutDuringSlowCreate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeopenai.Options{Seed: 29, Faults: fakeopenai.Faults{CreateSlow: 1, SlowResponse: 3 * time.Second}})
	p := h.plan(9, 3)
	args := lifecycleArgs("submit", p.JobKey, "--lease", "1s")
	start := time.Now()
	first := h.must([]int{exitTempFail}, args...)
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Errorf("the slow submitter took %s: its create was not cut at its 1 s lease", took)
	}
	var s stepOut
	decode(t, first, &s)
	if a := actions(s)[p.Shards[0].ShardID]; a != "unknown" {
		t.Errorf("slow submitter: shard %s %s, want unknown", p.Shards[0].ShardID, a)
	}
	time.Sleep(300 * time.Millisecond) // the settle (200 ms in the harness)
	second := h.must([]int{0}, args...)
	decode(t, second, &s)
	if a := actions(s)[p.Shards[0].ShardID]; a != "found" {
		t.Errorf("second submitter: shard %s %s, want found (the slow create's batch)", p.Shards[0].ShardID, a)
	}
	if got := h.creates(); got != len(p.Shards) {
		t.Errorf("%d creates for %d shards", got, len(p.Shards))
	}
	h.assertOneBatchPerShard(p)
}

// TestParallelSubmitLostCreates: submit --parallel works on several shards
// at a time (slow uploads overlap at the provider); with create responses
// lost among them, the job still ends with exactly one batch per shard and
// an exact report. A negative --parallel is a usage error.
func TestParallelSubmitLostCreates(t *testing.T) {
	h := newHarness(t, fakeopenai.Options{Seed: 9, Faults: fakeopenai.Faults{CreateLost: 3, UploadSlow: 6, UploadDelay: 300 * time.Millisecond}})
	p := h.plan(60, 10)
	if r := h.must([]int{exitUsage}, lifecycleArgs("submit", p.JobKey, "--parallel", "-1")...); h.creates() != 0 {
		t.Fatalf("--parallel -1 created batches: %s", r)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := h.must([]int{0, exitTempFail}, lifecycleArgs("submit", p.JobKey, "--lease", "1s", "--parallel", "4")...)
		if r.code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("submit --parallel 4 still pending after 30 s: %s", r)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if got := h.srv.Faults().CreateLost; got != 0 {
		t.Fatalf("%d lost creates left unused: the fault never fired", got)
	}
	if got := h.creates(); got != len(p.Shards) {
		t.Errorf("provider received %d creates for %d shards (lost ones looked up, never re-sent)", got, len(p.Shards))
	}
	var uploads []fakeopenai.Request
	for _, r := range h.srv.Requests() {
		if r.Method == "POST" && r.Path == "/v1/files" {
			uploads = append(uploads, r)
		}
	}
	overlapped := false
	for i, a := range uploads {
		for _, b := range uploads[i+1:] {
			overlapped = overlapped || b.At.Before(a.Done) && a.At.Before(b.Done)
		}
	}
	if len(uploads) < len(p.Shards) || !overlapped {
		t.Errorf("%d uploads for %d shards, overlapping: %v; want the shards' uploads side by side", len(uploads), len(p.Shards), overlapped)
	}
	h.assertOneBatchPerShard(p)
	rep := h.finish(p)
	if rep.Succeeded == 0 || len(rep.Files.Output) != len(p.Shards) {
		t.Errorf("want successes from %d output files, got %s files %v", len(p.Shards), rep.counts(), rep.Files.Output)
	}
}
