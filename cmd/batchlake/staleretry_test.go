package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/internal/fakeopenai"
)

// readLines returns the lines of a JSONL file.
func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSpace(b), []byte("\n"))
}

// answerAll writes an OpenAI output file in which every one of lines
// succeeded (the simulator with no defects), as a provider would return it.
func answerAll(t *testing.T, lines [][]byte) string {
	t.Helper()
	res, err := fakeopenai.Simulate(append(bytes.Join(lines, []byte("\n")), '\n'), 99, fakeopenai.Rates{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed != int64(len(lines)) {
		t.Fatalf("simulated %d successes for %d lines", res.Completed, len(lines))
	}
	p := filepath.Join(t.TempDir(), "output.jsonl")
	if err := os.WriteFile(p, res.Output, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type retryOut struct {
	RetryRecords     int64    `json:"retry_records"`
	AlreadySucceeded int64    `json:"already_succeeded"`
	Superseded       []string `json:"superseded"`
	Child            *struct {
		JobKey  string `json:"job_key"`
		Records int64  `json:"records"`
	} `json:"child"`
	Message string `json:"message"`
}

func (h *harness) retry(job string) retryOut {
	h.t.Helper()
	var r retryOut
	decode(h.t, h.must([]int{0}, "retry", "--job", job), &r)
	return r
}

func (h *harness) reconcileOut(job string, planned int64, out string) report {
	h.t.Helper()
	r := h.must([]int{exitPartial, 0}, "reconcile", "--job", job, "--out", out)
	var rep report
	decode(h.t, r, &rep)
	if rep.Expected != planned {
		h.t.Fatalf("report expected %d, planned %d", rep.Expected, planned)
	}
	return rep
}

// TestReconcileTooEarlyIsNotYet: reconcile of a job whose batches are still
// running exits 75 and changes nothing; --allow-running reports what has
// arrived without retrying any missing record and leaves the running shards
// to status and collect, which finish the job as usual.
func TestReconcileTooEarlyIsNotYet(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeopenai.Options{Seed: 23})
	p := h.plan(8, 4)
	h.must([]int{0}, "submit", "--job", p.JobKey)
	check75 := func(when string) {
		t.Helper()
		r := h.run("reconcile", "--job", p.JobKey)
		var out struct {
			Pending bool   `json:"pending"`
			Error   string `json:"error"`
		}
		if r.code == exitTempFail {
			decode(t, r, &out)
		}
		if r.code != exitTempFail || !out.Pending || !strings.Contains(out.Error, "not finished") {
			t.Fatalf("reconcile %s: want exit 75 saying the batches are not finished, got %s", when, r)
		}
	}
	check75("right after submit")
	h.must([]int{exitTempFail}, "status", "--job", p.JobKey) // one poll: in_progress
	check75("while the batches run")
	before := map[string]string{}
	for _, s := range p.Shards {
		before[s.ShardID] = strings.Join(h.ledgerStates(p.JobKey, s.ShardID), ",")
		if strings.Contains(before[s.ShardID], "RECONCILING") {
			t.Errorf("shard %s: a refused reconcile wrote %s", s.ShardID, before[s.ShardID])
		}
	}

	r := h.must([]int{exitPartial}, "reconcile", "--job", p.JobKey, "--allow-running")
	var early report
	decode(t, r, &early)
	if early.Missing != p.Records || early.RetryRecords != 0 || len(early.RetryShards) != 0 || early.ManualRecords != 0 {
		t.Errorf("reconcile --allow-running: %s retry shards %v; want every record missing and none retried or manual", early.counts(), early.RetryShards)
	}
	for _, s := range p.Shards {
		if got := strings.Join(h.ledgerStates(p.JobKey, s.ShardID), ","); got != before[s.ShardID] {
			t.Errorf("shard %s: ledger %s after --allow-running, want it left to status (%s)", s.ShardID, got, before[s.ShardID])
		}
	}

	h.statusUntilTerminal(p.JobKey)
	h.must([]int{0}, "collect", "--job", p.JobKey)
	rep := h.reconcile(p.JobKey, p.Records)
	if rep.Missing >= p.Records || len(rep.Files.Output) != len(p.Shards) {
		t.Errorf("final reconcile: %s from %d output files, want the collected results", rep.counts(), len(rep.Files.Output))
	}
	if want := rep.Missing + rep.FailedRetryable + rep.QualityFailed; rep.RetryRecords != want {
		t.Errorf("final reconcile retries %d records, want %d", rep.RetryRecords, want)
	}
}

// TestStaleRetryChild: a child made from a reconcile that saw only part of
// the results is refused at submit once the parent's newest reconcile shows
// some of its records succeeded (exit 2 naming the count); a newer retry
// supersedes it, and submit then refuses it naming the newer child, which
// holds only the records still to do and is submitted.
func TestStaleRetryChild(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeopenai.Options{Seed: 24})
	in := h.writeInput(10)
	lines := readLines(t, in)
	var p planOut
	decode(t, h.must([]int{0}, "plan", "--input", in, "--tenant", "acme", "--prompt-version", "p1"), &p)

	h.must([]int{0}, "ingest", "--job", p.JobKey, "--output", answerAll(t, lines[0:4]))
	if rep := h.reconcileOut(p.JobKey, 10, t.TempDir()); rep.RetryRecords != 6 {
		t.Fatalf("first reconcile: %s, want 6 to retry", rep.counts())
	}
	first := h.retry(p.JobKey)
	if first.Child == nil || first.Child.Records != 6 {
		t.Fatalf("first retry: %+v", first)
	}

	// The rest of the results arrive late: 4 of the child's 6 records succeeded.
	h.must([]int{0}, "ingest", "--job", p.JobKey, "--output", answerAll(t, lines[4:8]))
	if rep := h.reconcileOut(p.JobKey, 10, t.TempDir()); rep.RetryRecords != 2 {
		t.Fatalf("second reconcile: %s, want 2 to retry", rep.counts())
	}
	r := h.run("submit", "--job", first.Child.JobKey)
	if r.code != exitUsage || !strings.Contains(r.stdout, "4 of its 6 records") || !strings.Contains(r.stdout, p.JobKey) {
		t.Fatalf("submit of the stale child: want exit 2 naming 4 of 6 records and the parent, got %s", r)
	}

	second := h.retry(p.JobKey)
	if second.Child == nil || second.Child.Records != 2 || len(second.Superseded) != 1 || second.Superseded[0] != first.Child.JobKey {
		t.Fatalf("second retry: %+v; want a child of 2 superseding %s", second, first.Child.JobKey)
	}
	r = h.run("submit", "--job", first.Child.JobKey)
	if r.code != exitUsage || !strings.Contains(r.stdout, "superseded") || !strings.Contains(r.stdout, second.Child.JobKey) {
		t.Fatalf("submit of the superseded child: want exit 2 naming %s, got %s", second.Child.JobKey, r)
	}
	var s stepOut
	decode(t, h.must([]int{0}, "submit", "--job", second.Child.JobKey), &s)
	if len(s.Shards) != 1 || s.Shards[0].Action != "created" {
		t.Errorf("submit of the newest child: %+v", s)
	}
	if got := h.creates(); got != 1 {
		t.Errorf("%d batches created, want only the newest child's", got)
	}
	// Submitting it again is not refused: it is bound, nothing is re-sent.
	h.must([]int{0}, "submit", "--job", second.Child.JobKey)
}

// TestRetryLeavesOutWhatASiblingDid: records that succeeded in an earlier
// child never go into a newer child of the same parent, even though the
// parent's own outcome for them is still a failure; nor do the records that
// child was sent with and did not answer: they are its to retry (attempt 3),
// and a sibling would send them a second time as attempt 2. Its retry
// leaves out the records the parent's late results answered.
func TestRetryLeavesOutWhatASiblingDid(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakeopenai.Options{Seed: 25})
	in := h.writeInput(10)
	lines := readLines(t, in)
	var p planOut
	decode(t, h.must([]int{0}, "plan", "--input", in, "--tenant", "acme", "--prompt-version", "p1"), &p)
	h.must([]int{0}, "ingest", "--job", p.JobKey, "--output", answerAll(t, lines[0:4]))
	out := t.TempDir()
	h.reconcileOut(p.JobKey, 10, out)
	first := h.retry(p.JobKey)
	if first.Child == nil || first.Child.Records != 6 {
		t.Fatalf("first retry: %+v", first)
	}

	// The child answers req-0004..req-0006 (found by the lineage's business key).
	lin := map[string]string{} // custom id -> business key
	f, err := os.Open(filepath.Join(out, "retry-lineage.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var li struct {
			CustomID    string `json:"custom_id"`
			BusinessKey string `json:"business_key"`
		}
		if err := json.Unmarshal(sc.Bytes(), &li); err != nil {
			t.Fatal(err)
		}
		lin[li.CustomID] = li.BusinessKey
	}
	f.Close()
	var done [][]byte
	for _, l := range readLines(t, filepath.Join(out, "retry-00000.jsonl")) {
		var x struct {
			CustomID string `json:"custom_id"`
		}
		json.Unmarshal(l, &x)
		switch lin[x.CustomID] {
		case "req-0004", "req-0005", "req-0006":
			done = append(done, l)
		}
	}
	if len(done) != 3 {
		t.Fatalf("found %d of the child's lines for req-0004..6, want 3", len(done))
	}
	h.must([]int{0}, "ingest", "--job", first.Child.JobKey, "--output", answerAll(t, done))
	if rep := h.reconcileOut(first.Child.JobKey, 6, t.TempDir()); rep.Succeeded != 3 {
		t.Fatalf("child reconcile: %s, want 3 succeeded", rep.counts())
	}

	// Late results for the parent (req-0008, req-0009): its retry set is now
	// req-0004..req-0007, three of which the child already did.
	h.must([]int{0}, "ingest", "--job", p.JobKey, "--output", answerAll(t, lines[8:10]))
	if rep := h.reconcileOut(p.JobKey, 10, t.TempDir()); rep.RetryRecords != 4 {
		t.Fatalf("parent's second reconcile: %s, want 4 to retry", rep.counts())
	}
	second := h.retry(p.JobKey)
	if second.Child != nil || second.AlreadySucceeded != 3 || !strings.Contains(second.Message, "1 were sent in a retry of it ("+first.Child.JobKey[:12]+")") {
		t.Fatalf("second retry: %+v; want no child, 3 left out as already succeeded and 1 as sent in %s", second, first.Child.JobKey[:12])
	}
	// The child's retry: req-0007..9 had no line there, but req-0008 and
	// req-0009 succeeded since in the parent.
	grand := h.retry(first.Child.JobKey)
	if grand.Child == nil || grand.Child.Records != 1 || grand.AlreadySucceeded != 2 {
		t.Fatalf("retry of the child: %+v; want a child of 1 record, 2 left out as already succeeded", grand)
	}
	var keys []struct {
		BusinessKey string `json:"business_key"`
		Attempt     int    `json:"attempt"`
	}
	h.query(fmt.Sprintf("SELECT business_key, attempt FROM expected WHERE job_key = '%s'", grand.Child.JobKey), &keys)
	if len(keys) != 1 || keys[0].BusinessKey != "req-0007" || keys[0].Attempt != 3 {
		t.Errorf("the grandchild holds %+v, want only req-0007, attempt 3", keys)
	}
}
