package reconcile

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// TestProfileReadOnlySession: with BATCHLAKE_SQL_PROFILE set, a read-only
// session (sql, cost, report, manual) stops profiling before it is locked,
// and its queries and the report run as without it (a profile written after
// the lockdown was refused, and the refusal failed the next query).
func TestProfileReadOnlySession(t *testing.T) {
	ctx := context.Background()
	x := newLineageLake(t)
	dir := t.TempDir()
	prev := sqlProfileDir
	sqlProfileDir = dir
	t.Cleanup(func() { sqlProfileDir = prev })
	e := x.session(t)
	defer e.Close()
	d, _ := lake.ParseDigest(x.m1.JobKey)
	s, err := e.Summarize(ctx, x.l, d)
	if err != nil {
		t.Fatalf("report with profiling asked for: %v", err)
	}
	if s.Expected != 4 {
		t.Errorf("report's expected records %d, want 4", s.Expected)
	}
	rows, err := e.Query(ctx, "SELECT count(*) FROM expected")
	if err != nil {
		t.Fatalf("query with profiling asked for: %v", err)
	}
	rows.Close()
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.Contains(f.Name(), "lockdown") {
			t.Errorf("profile %s of the lockdown itself", f.Name())
		}
	}
}
