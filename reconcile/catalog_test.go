package reconcile

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/batchlake/batchlake/errkind"
)

// TestCatalog: the catalog database opens in a fresh DuckDB and its views
// give the same numbers as the report.
func TestCatalog(t *testing.T) {
	ctx := context.Background()
	l, m, dir := smallLake(t)
	rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "sub", "analytics.duckdb")
	if _, err := Catalog(ctx, l, out, EngineOptions{Threads: 1, TempDir: dir}, Scope{}); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", out+"?access_mode=READ_ONLY")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var succeeded, expected, events int64
	var total string
	if err := db.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM records WHERE final_state = 'succeeded'),
		(SELECT count(*) FROM expected),
		(SELECT count(*) FROM ledger),
		(SELECT CAST(sum(cost_usd) AS VARCHAR) FROM costs)`).Scan(&succeeded, &expected, &events, &total); err != nil {
		t.Fatal(err)
	}
	if succeeded != rep.Succeeded || expected != rep.Expected || events == 0 || trimDecimal(total) != string(rep.CostUSD["total"]) {
		t.Fatalf("catalog: succeeded %d expected %d events %d cost %s; report %d %d %s", succeeded, expected, events, total, rep.Succeeded, rep.Expected, rep.CostUSD["total"])
	}
}

// TestCostQuery: grouped cost equals the report's per-category cost, and an
// unknown dimension is a usage error.
func TestCostQuery(t *testing.T) {
	ctx := context.Background()
	l, m, dir := smallLake(t)
	rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := OpenSession(ctx, l, EngineOptions{Threads: 1, TempDir: dir}, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rows, err := e.CostQuery(ctx, []string{"category"}, m.JobKey, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for rows.Next() {
		var cat string
		var lines, recs int64
		var cost duckdb.Decimal
		if err := rows.Scan(&cat, &lines, &recs, &cost); err != nil {
			t.Fatal(err)
		}
		got[cat] = FormatDecimal(cost)
	}
	rows.Close()
	for _, c := range Categories {
		if want := string(rep.CostUSD[c]); want != "0" && got[c] != want {
			t.Errorf("cost by category %s = %s, report %s", c, got[c], want)
		}
	}
	if _, err := e.CostQuery(ctx, []string{"job_key; DROP"}, "", ""); err == nil {
		t.Error("accepted an unknown dimension")
	}
}

// TestEngineOddPaths: DuckDB gets its settings and database path whole,
// whatever bytes they hold. A DSN built by concatenation failed on '&' and
// spilled to "c d" for "c+d", outside the folder it was given.
func TestEngineOddPaths(t *testing.T) {
	ctx := context.Background()
	l, m, dir := smallLake(t)
	if _, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a&b", "c+d", "sp ace", "per%20cent", "q?x=1", "hash#x", "ünï", "semi;colon", "quote'd"} {
		t.Run(name, func(t *testing.T) {
			odd := filepath.Join(dir, name)
			if err := os.MkdirAll(odd, 0o755); err != nil {
				t.Fatal(err)
			}
			e, err := OpenSession(ctx, l, EngineOptions{Threads: 1, TempDir: odd, MemoryLimit: "100MB"}, Scope{})
			if err != nil {
				t.Fatal(err)
			}
			var spill string
			err = e.DB.QueryRowContext(ctx, "SELECT current_setting('temp_directory')").Scan(&spill)
			e.Close()
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Dir(filepath.Dir(spill)) != odd {
				t.Errorf("--tmp-dir %q: DuckDB spills to %q", odd, spill)
			}
			out := filepath.Join(odd, "cat "+name+".duckdb")
			_, err = Catalog(ctx, l, out, EngineOptions{Threads: 1, TempDir: odd}, Scope{})
			if strings.Contains(out, "?") {
				// DuckDB itself cuts a database path at '?'.
				if !errors.Is(err, errkind.ErrBadInput) {
					t.Fatalf("catalog --out %q: %v, want a usage error", out, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c, err := duckdb.NewConnector("", nil)
			if err != nil {
				t.Fatal(err)
			}
			db := sql.OpenDB(c)
			defer db.Close()
			var n int64
			if _, err := db.ExecContext(ctx, "ATTACH "+quote(out)+" AS c (READ_ONLY)"); err != nil {
				t.Fatal(err)
			}
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM c.expected").Scan(&n); err != nil || n != m.ExpectedRecords {
				t.Errorf("catalog at %q: %d expected rows (%v), want %d", out, n, err, m.ExpectedRecords)
			}
			ents, _ := os.ReadDir(odd)
			for _, en := range ents {
				if !strings.HasPrefix(en.Name(), "cat ") {
					t.Errorf("left behind in %q: %s", odd, en.Name())
				}
			}
		})
	}
}
