package reconcile

import (
	"context"
	"fmt"
	"testing"
)

// TestManualQueueOfEveryRecordFitsTheLimit: a job whose every record failed
// for good (one attempt) has every record in the manual queue, and the
// manual view lists them all within a DuckDB memory limit of 32MB. Kept in an
// aggregate, the records' strings (the latest business key, outcome, reason
// and job of each) took that limit at 60,000 records and failed.
func TestManualQueueOfEveryRecordFitsTheLimit(t *testing.T) {
	t.Parallel()
	const n, limit = 60_000, "32MB"
	l, dir := testLake(t)
	var g genBatch
	for i := range n {
		g.input = append(g.input, requestLine(i))
		g.errors = append(g.errors, errLine(fmt.Sprintf("r%d", i), 400, "invalid_request_error"))
	}
	m := planAndIngest(t, l, dir, g, 0)
	if _, err := Run(context.Background(), l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}, MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	e, err := OpenSession(context.Background(), l, EngineOptions{Threads: 1, TempDir: dir, MemoryLimit: limit}, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var queued, keys int64
	if err := e.DB.QueryRow(`SELECT count(*), count(DISTINCT business_key) FROM manual WHERE outcome = 'failed_permanent' AND last_job_key = ?`, m.JobKey).Scan(&queued, &keys); err != nil {
		t.Fatalf("manual view at a %s limit: %v", limit, err)
	}
	if queued != n || keys != n {
		t.Errorf("manual queue: %d records, %d business keys, want %d", queued, keys, n)
	}
}
