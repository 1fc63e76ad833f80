package reconcile

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

func smallLake(t *testing.T) (*lake.Lake, *lake.Manifest, string) {
	t.Helper()
	l, dir := testLake(t)
	g := generate(rand.New(rand.NewPCG(7, 7)), 40, 1, 1)
	return l, planAndIngest(t, l, dir, g, 0), dir
}

// reconciledSession is a session (every view) over smallLake once its job
// is reconciled; it is closed when the test ends.
func reconciledSession(t *testing.T) (*Engine, *lake.Lake, string) {
	t.Helper()
	return reconciledSessionWith(t, EngineOptions{Threads: 1})
}

// reconciledSessionWith is reconciledSession with the session's engine
// options o (its TempDir is the lake's folder).
func reconciledSessionWith(t *testing.T, o EngineOptions) (*Engine, *lake.Lake, string) {
	t.Helper()
	ctx := context.Background()
	l, m, dir := smallLake(t)
	if _, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}}); err != nil {
		t.Fatal(err)
	}
	o.TempDir = dir
	e, err := OpenSession(ctx, l, o, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, l, dir
}

func TestQualityGate(t *testing.T) {
	t.Parallel()
	l, m, dir := smallLake(t)
	secret := filepath.Join(dir, "secret.csv")
	os.WriteFile(secret, []byte("a\n1\n"), 0o644)
	cases := []struct {
		gate string
		ok   bool
	}{
		{"finish_reason <> 'length'", true},
		{"length(output_text) > 3 AND output_tokens < 10000", true},
		{"true) OR (1=1", true}, // still just a predicate
		{"1; DROP TABLE expected", false},
		{"(SELECT count(*) FROM read_csv('" + secret + "')) > 0", false},
		{"exists (SELECT 1 FROM expected)", false},
		{"true) UNION SELECT * FROM attempts_raw WHERE (true", false},
		{"true) ORDER BY (1", false},
		{"getenv('HOME') IS NOT NULL", false},
		{"current_setting('threads') > 0", false},
		{"no_such_column = 1", false},
		{"true --", false},
	}
	for _, c := range cases {
		t.Run(c.gate, func(t *testing.T) {
			_, err := Run(context.Background(), l, Options{JobKey: m.JobKey, QualityGate: c.gate, TmpDir: dir, Engine: EngineOptions{Threads: 1}})
			if c.ok && err != nil {
				t.Fatalf("refused a predicate: %v", err)
			}
			if !c.ok {
				if err == nil {
					t.Fatal("accepted")
				}
				if !errors.Is(err, errkind.ErrBadInput) || !strings.Contains(err.Error(), "--quality-gate") {
					t.Fatalf("error %v: want a --quality-gate usage error", err)
				}
			}
		})
	}
}

func TestSQLSessionIsReadOnly(t *testing.T) {
	ctx := context.Background()
	e, _, dir := reconciledSession(t)
	secret := filepath.Join(dir, "secret.csv")
	os.WriteFile(secret, []byte("a\n1\n"), 0o644)
	victim := filepath.Join(dir, "written.csv")
	for _, q := range []string{
		"SELECT count(*) FROM records",
		"SELECT final_state, count(*) FROM records GROUP BY ALL",
		"SELECT category, sum(cost_usd) FROM costs GROUP BY 1",
		"SELECT count(*) FROM ledger",
		"SELECT count(*) FROM attempts WHERE record_id IS NULL",
		"SELECT count(*) FROM manifests JOIN shards USING (job_key)",
		// Queries of every shape an analyst writes pass the one-query check.
		"WITH f AS (SELECT record_id, final_state FROM records) SELECT final_state, count(*) FROM f GROUP BY ALL ORDER BY 2 DESC LIMIT 3;",
		"FROM records SELECT record_id QUALIFY row_number() OVER (PARTITION BY final_state ORDER BY record_id) = 1",
		"SELECT COLUMNS('.*_tokens') FROM attempts",
		"SELECT list_transform([1, 2], x -> x * 2) AS l, [r FOR r IN range(3)] AS c",
		"PIVOT (SELECT category, cost_usd FROM costs) ON category IN ('first_success', 'duplicate_submission') USING sum(cost_usd)",
		"SELECT * FROM range(3) UNION ALL SELECT * FROM generate_series(1, 2)",
		"SELECT unnest([1, 2]) AS u",
		"DESCRIBE records",
		"SUMMARIZE SELECT attempt FROM outcomes",
		"SELECT table_name FROM information_schema.tables",
		"VALUES (1, 'a'), (2, 'b')",
		"/* a comment */ SELECT 1 -- and another",
	} {
		rows, err := e.Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		rows.Close()
	}
	for _, q := range []string{
		"COPY (SELECT 1) TO '" + victim + "'",
		"SELECT * FROM read_csv('" + secret + "')",
		"SELECT * FROM read_text('/etc/passwd')",
		"ATTACH '" + filepath.Join(dir, "x.db") + "'",
		"INSTALL httpfs",
		"LOAD httpfs",
		"CREATE TABLE t AS SELECT 1",
		"DROP VIEW records",
		"SET enable_external_access = true",
		"SELECT 1; COPY (SELECT 1) TO '" + victim + "'",
		"PRAGMA threads=1",
		"SELECT * FROM glob('/etc/*')",
	} {
		rows, err := e.Query(ctx, q)
		if err == nil {
			for rows.Next() {
			}
			err = rows.Err()
			rows.Close()
		}
		if err == nil {
			t.Errorf("%s: allowed", q)
		}
	}
	if _, err := os.Stat(victim); err == nil {
		t.Fatal("a query wrote a file")
	}
}

// testLake opens an empty local lake in a fresh directory (returned too, for
// the test's other files), closed when the test ends.
func testLake(t testing.TB) (*lake.Lake, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := lake.Open(context.Background(), filepath.Join(dir, "lake"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, dir
}

// TestQualityGateRunsAsChecked: a gate is run as the predicate that was
// checked, whatever its parentheses. "true) OR (true" is checked as
// WHERE (true) OR (true); run as text inside "… AND has_output AND (…)" it
// used to become "… AND (true) OR (true)", which made every failed line a
// success. Each gate here is a tautology, so it must classify exactly as no
// gate does.
func TestQualityGateRunsAsChecked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reconcileWith := func(t *testing.T, gate string) *Report {
		l, m, dir := smallLake(t)
		rep, err := Run(ctx, l, Options{JobKey: m.JobKey, QualityGate: gate, TmpDir: dir, Engine: EngineOptions{Threads: 1}})
		if err != nil {
			t.Fatalf("gate %q: %v", gate, err)
		}
		return rep
	}
	counts := func(r *Report) string {
		return fmt.Sprintf("succeeded=%d quality_failed=%d failed_retryable=%d failed_permanent=%d missing=%d retry=%d manual=%d",
			r.Succeeded, r.QualityFailed, r.FailedRetryable, r.FailedPermanent, r.Missing, r.RetryRecords, r.ManualRecords)
	}
	base := reconcileWith(t, "")
	if base.FailedPermanent+base.FailedRetryable == 0 {
		t.Fatalf("the lake has no failed record, so the test would prove nothing: %s", counts(base))
	}
	for _, gate := range []string{"true) OR (true", "false) OR (true", "true\n) OR (\ntrue", "status_code = 200) OR (status_code <> 200"} {
		t.Run(gate, func(t *testing.T) {
			if got := reconcileWith(t, gate); counts(got) != counts(base) {
				t.Errorf("gate %q: %s; with no gate %s", gate, counts(got), counts(base))
			}
		})
	}
}

// TestLockdownBelowTheCheck: the session's settings, with the one-query
// check bypassed (statements sent to DuckDB directly). Reading the views
// works; writing anywhere but the listed files fails; the settings cannot be
// changed back. A listed file is a grant to write too (DuckDB's
// allowed_paths), so only the file's own permissions stop that: as another
// user than root the write fails.
func TestLockdownBelowTheCheck(t *testing.T) {
	ctx := context.Background()
	e, l, dir := reconciledSession(t)
	var n int64
	if err := e.DB.QueryRowContext(ctx, "SELECT count(*) FROM costs").Scan(&n); err != nil || n == 0 {
		t.Fatalf("the views do not read: %d rows, %v", n, err)
	}
	lakeDir, _ := l.LocalDir()
	keys, err := l.List(ctx, lake.TablePrefix("costs"))
	if err != nil || len(keys) == 0 {
		t.Fatalf("no costs file: %v", err)
	}
	listed := l.LocalPath(keys[0])
	for _, q := range []string{
		"COPY (SELECT 1 AS x) TO " + quote(filepath.Join(dir, "new.csv")),
		"COPY (SELECT 1 AS x) TO " + quote(filepath.Join(lakeDir, "objects", "new.parquet")) + " (FORMAT parquet)",
		"COPY (SELECT 1 AS x) TO " + quote(listed+".x") + " (FORMAT parquet, USE_TMP_FILE false)",
		"COPY (SELECT 1 AS x) TO " + quote(listed) + " (FORMAT parquet)", // through a temp file beside it
		"EXPORT DATABASE " + quote(filepath.Join(dir, "export")),
		"ATTACH " + quote(filepath.Join(dir, "x.db")) + " AS x",
		"SET enable_external_access = true",
		"SET allowed_directories = ['/']",
		"RESET allowed_paths",
		"SET lock_configuration = false",
		"SET profiling_output = " + quote(filepath.Join(dir, "profile.json")),
		"SET temp_directory = " + quote(dir),
		"INSTALL httpfs",
	} {
		if _, err := e.DB.ExecContext(ctx, q); err == nil {
			t.Errorf("%s: allowed below the check", q)
		}
	}
	for _, p := range []string{filepath.Join(dir, "new.csv"), filepath.Join(lakeDir, "objects", "new.parquet"), listed + ".x", filepath.Join(dir, "export"), filepath.Join(dir, "x.db"), filepath.Join(dir, "profile.json")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	before, _, err := lake.HashFile(listed)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.DB.ExecContext(ctx, "COPY (SELECT 1 AS x) TO "+quote(listed)+" (FORMAT parquet, USE_TMP_FILE false)")
	after, _, _ := lake.HashFile(listed)
	if os.Geteuid() != 0 && (err == nil || after != before) {
		t.Errorf("a listed, read-only lake file was written by a process that is not root: %v", err)
	}
	if os.Geteuid() == 0 {
		t.Logf("as root DuckDB may write a listed file (err %v, changed %v): the one-query check is what stops it", err, after != before)
	}
}
