package reconcile

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/duckdb/duckdb-go/v2"
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
