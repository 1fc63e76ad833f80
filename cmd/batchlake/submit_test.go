package main

import (
	"strings"
	"testing"

	"github.com/batchlake/batchlake/providers/fakeopenai"
)

// TestLostCreatesEndWithOneBatchPerShard is issue 4's "done when": a job of
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

	// Idempotent afterwards: submit binds nothing new and creates nothing.
	r := h.must([]int{0}, lifecycleArgs("submit", p.JobKey, "--lease", "1s")...)
	if strings.Contains(r.stdout, `"created"`) || h.creates() != 3 {
		t.Errorf("submit after the job ran created again: %s", r)
	}
}
