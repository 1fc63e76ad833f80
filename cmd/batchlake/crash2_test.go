package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/batchlake/batchlake/lake/failpoint"
)

// baselineFlow runs plan, ingest, reconcile and retry once, uninterrupted, and
// snapshots the lake: what every crashed or raced run must end identical to.
var baselineFlow = struct {
	once     sync.Once
	snap     snapshot
	rep      report
	cost     float64 // sum of the costs view
	attempts float64 // rows of the attempts view
	err      string
}{}

func flowBaseline(t *testing.T) (snapshot, report) {
	t.Helper()
	baselineFlow.once.Do(func() {
		b := newBox(t)
		f := newFlowFiles(t)
		var job string
		for _, s := range flowSteps(f) {
			r := b.runStep(s, job)
			switch s.name {
			case "plan":
				job = jobOf(t, r)
			case "reconcile":
				decode(t, r, &baselineFlow.rep)
			}
		}
		b.verify()
		baselineFlow.snap = takeSnapshot(t, b.lake)
		baselineFlow.cost = b.sqlCount("SELECT sum(cost_usd::DOUBLE) FROM costs")
		baselineFlow.attempts = b.sqlCount("SELECT count(*) FROM attempts")
		if baselineFlow.cost <= 0 || baselineFlow.attempts < flowN {
			baselineFlow.err = fmt.Sprintf("baseline: cost %v, %v attempt rows", baselineFlow.cost, baselineFlow.attempts)
		}
		rep := baselineFlow.rep
		// The comparison is only sharp if every kind of record and line is present.
		if rep.Succeeded == 0 || rep.FailedRetryable == 0 || rep.Missing == 0 || rep.Unknown == 0 || rep.Duplicate == 0 ||
			rep.Quarantined == 0 || rep.RetryRecords == 0 || len(baselineFlow.snap.reports) != 1 || baselineFlow.snap.expected <= flowN {
			baselineFlow.err = "baseline too clean to compare with: " + rep.counts()
		}
		if t.Failed() && baselineFlow.err == "" {
			baselineFlow.err = "baseline run failed"
		}
	})
	if baselineFlow.err != "" {
		t.Fatal(baselineFlow.err)
	}
	return baselineFlow.snap, baselineFlow.rep
}

// crashCases: the step (index into flowSteps) and the failpoint that kills it.
// The plan.* failpoints also fire inside retry (it plans the child job).
var crashCases = []struct {
	step int
	fp   string
	long bool // only under BATCHLAKE_LONG
}{
	{0, failpoint.PlanAfterShard, false},
	{0, failpoint.PlanAfterShard + "@3", true},
	{0, failpoint.PlanAfterExpected, false},
	{0, failpoint.PlanAfterManifest, false},
	{0, failpoint.PlanAfterLedger, false},
	{0, failpoint.PlanAfterLedger + "@4", true},
	{1, failpoint.IngestAfterRaw, false},
	{1, failpoint.IngestAfterAttempts, false},
	{1, failpoint.IngestAfterMarker, false},
	{1, failpoint.IngestAfterRaw + "@2", true},
	{1, failpoint.IngestAfterMarker + "@2", true},
	{2, failpoint.ReconcileAfterReconciling, false},
	{2, failpoint.ReconcileAfterReconciling + "@3", true},
	{2, failpoint.ReconcileAfterOutcomes, false},
	{2, failpoint.ReconcileAfterTables, false},
	{2, failpoint.ReconcileAfterRetry, false},
	{2, failpoint.ReconcileAfterReport, false},
	{2, failpoint.ReconcileBeforeFinal, false},
	{2, failpoint.ReconcileBeforeFinal + "@2", true},
	{3, failpoint.RetryBeforePlan, false},
	{3, failpoint.PlanAfterShard, false},
	{3, failpoint.PlanAfterManifest, false},
	{3, failpoint.PlanAfterLedger, true},
}

// TestCrashMatrixLake kills plan, ingest, reconcile and retry with SIGKILL
// at each of their failpoints, runs the step again (waiting out the
// reconcile lease the crash left) and the rest of the flow, and proves the
// lake identical to an uninterrupted run's: the same object, table and
// marker keys (content-addressed: same names, same bytes), the same marker
// bodies modulo timestamps (so the same report counts), every ledger shard
// ending in the same state, one report per job, and `verify` exit 0.
func TestCrashMatrixLake(t *testing.T) {
	want, _ := flowBaseline(t)
	for _, c := range crashCases {
		if c.long && !longRun() {
			continue
		}
		steps := []string{"plan", "ingest", "reconcile", "retry"}
		t.Run(steps[c.step]+"/"+c.fp, func(t *testing.T) {
			t.Parallel()
			b := newBox(t)
			f := newFlowFiles(t)
			var job string
			for i, s := range flowSteps(f) {
				if i == c.step {
					r, _ := b.exec([]string{failpoint.EnvVar + "=" + c.fp}, s.args(job)...)
					if !r.killed {
						t.Fatalf("failpoint %s was not reached: %s", c.fp, r)
					}
				}
				r := b.runStep(s, job)
				if s.name == "plan" {
					job = jobOf(t, r)
				}
			}
			b.verify()
			problems, lost := want.diff(takeSnapshot(t, b.lake))
			for _, p := range problems {
				t.Error(p)
			}
			record(t, "crash", "SIGKILL in "+steps[c.step]+" at "+strings.Split(c.fp, "@")[0], len(problems) == 0, lost)
		})
	}
}
