package reconcile

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
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
	if _, err := Catalog(ctx, l, out, EngineOptions{Threads: 1, TempDir: dir}, CatalogOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Dir(out)) // a live catalog opens from its folder
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
	names := []string{"a&b", "c+d", "sp ace", "per%20cent", "q?x=1", "hash#x", "ünï", "semi;colon", "quote'd"}
	if testing.Short() {
		// -short: a DSN separator, a byte URL decoding changes, the '?'
		// DuckDB cuts a database path at, and a quote; each name costs two
		// sessions and a catalog, and the full run tries all nine.
		names = []string{"a&b", "c+d", "q?x=1", "quote'd"}
	}
	for _, name := range names {
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
			_, err = Catalog(ctx, l, out, EngineOptions{Threads: 1, TempDir: odd}, CatalogOptions{})
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
			t.Chdir(odd) // a live catalog opens from its folder
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

// dumpView returns a view's columns and types, and its rows rendered and
// sorted, for comparing two databases' views.
func dumpView(t *testing.T, db *sql.DB, view string) (string, []string) {
	t.Helper()
	rows, err := db.Query("SELECT * FROM " + view)
	if err != nil {
		t.Fatalf("view %s: %v", view, err)
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range types {
		cols = append(cols, c.Name()+" "+c.DatabaseTypeName())
	}
	out := scanRows(t, rows)
	sort.Strings(out)
	return strings.Join(cols, ", "), out
}

// sameViews checks that every view of the catalog gives the rows and types
// the session's views give over the same lake, and that it has rows.
func sameViews(t *testing.T, catalog *sql.DB, l *lake.Lake, tmp string, static ...string) {
	t.Helper()
	e, err := OpenSession(context.Background(), l, EngineOptions{Threads: 1, TempDir: tmp}, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, v := range catalogViews {
		if slices.Contains(static, v) {
			continue
		}
		wantCols, want := dumpView(t, e.DB, v)
		gotCols, got := dumpView(t, catalog, v)
		if gotCols != wantCols {
			t.Errorf("view %s: catalog columns\n%s\nsession\n%s", v, gotCols, wantCols)
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("view %s: the catalog has %d rows, the session %d; first difference:\n%s", v, len(got), len(want), firstDiff(got, want))
		}
		if len(want) == 0 && v != "quarantine" && v != "manual" {
			t.Errorf("view %s is empty: the comparison proves nothing", v)
		}
	}
}

func firstDiff(a, b []string) string {
	for i := range max(len(a), len(b)) {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return "catalog: " + x + "\nsession: " + y
		}
	}
	return ""
}

// TestLiveCatalog: the catalog of a local lake is live and relative. Its
// views give what the session's give (on a lake of two generations with
// batches and retries, in table format 1); a job planned, ingested and
// reconciled after it was written is seen without writing it again; and a
// copy of the folder holding lake and catalog, at another path, opens and
// reads its own lake. The catalog of before listed files: it saw no new job
// and read the original lake's files from the copy.
func TestLiveCatalog(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	work := filepath.Join(base, "work")
	lakeDir := filepath.Join(work, "lake")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(copyTree(t, filepath.Join("..", "testdata", "lake-v1")), lakeDir); err != nil {
		t.Fatal(err)
	}
	l, err := lake.Open(ctx, lakeDir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tmp := t.TempDir()
	out := filepath.Join(work, "analytics.duckdb")
	res, err := Catalog(ctx, l, out, EngineOptions{Threads: 1, TempDir: tmp}, CatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Kind != "live" || res.Lake != "lake" || res.OpenFrom != work {
		t.Fatalf("catalog result %+v: want a live catalog reading lake from %s", res, work)
	}
	t.Chdir(work)
	open := func() *sql.DB {
		db, err := sql.Open("duckdb", out+"?access_mode=READ_ONLY")
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db := open()
	t.Run("same as the session", func(t *testing.T) { sameViews(t, db, l, tmp) })
	jobs := func(db *sql.DB) (n int64, cost string) {
		t.Helper()
		if err := db.QueryRow("SELECT count(DISTINCT job_key), CAST(sum(cost_usd) AS VARCHAR) FROM costs").Scan(&n, &cost); err != nil {
			t.Fatal(err)
		}
		return n, cost
	}
	before, _ := jobs(db)
	db.Close()

	// A new job lands: planned, ingested and reconciled after the catalog.
	m := planAndIngest(t, l, tmp, generate(rand.New(rand.NewPCG(11, 11)), 30, 1, 1), 0)
	rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: tmp, Engine: EngineOptions{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	db = open()
	after, _ := jobs(db)
	var newCost string
	if err := db.QueryRow("SELECT CAST(sum(cost_usd) AS VARCHAR) FROM costs WHERE job_key = ?", m.JobKey).Scan(&newCost); err != nil {
		t.Fatal(err)
	}
	if after != before+1 || trimDecimal(newCost) != string(rep.CostUSD["total"]) {
		t.Errorf("after a new job: %d jobs with costs (before %d), the new one's cost %s, its report's %s", after, before, newCost, rep.CostUSD["total"])
	}
	// A folder with no file when the catalog was written (quarantine: the
	// fixture quarantined nothing, the new job a line) reads its stand-in
	// until catalog --refresh.
	if !slices.Equal(res.Static, []string{"quarantine"}) {
		t.Errorf("static sources %v, want [quarantine]", res.Static)
	}
	t.Run("same as the session after a new job", func(t *testing.T) { sameViews(t, db, l, tmp, res.Static...) })
	db.Close()
	res, err = Catalog(ctx, l, out, EngineOptions{Threads: 1, TempDir: tmp}, CatalogOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Static) != 0 || !res.Refreshed {
		t.Errorf("refreshed: %+v, want no static source", res)
	}
	db = open()
	t.Run("same as the session after refresh", func(t *testing.T) { sameViews(t, db, l, tmp) })
	db.Close()

	// A copy of the folder at another path reads its own lake: remove the
	// original's, so that a path leading back there would fail.
	moved := filepath.Join(base, "elsewhere", "copy")
	if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(work, moved); err != nil {
		t.Fatal(err)
	}
	t.Chdir(moved)
	out = filepath.Join(moved, "analytics.duckdb")
	db = open()
	defer db.Close()
	if n, _ := jobs(db); n != after {
		t.Errorf("the moved catalog sees %d jobs with costs, want %d", n, after)
	}
}

// TestSnapshotCatalogRefresh: a remote lake's catalog (here mem://) is a
// snapshot of the files committed when it was written, opens from any
// folder, and catalog --refresh brings in a job that landed since.
func TestSnapshotCatalogRefresh(t *testing.T) {
	ctx := context.Background()
	l, err := lake.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	o := EngineOptions{Threads: 1, TempDir: dir, CacheDir: filepath.Join(dir, "cache")}
	jobs := func() int64 {
		t.Helper()
		db, err := sql.Open("duckdb", filepath.Join(dir, "out", "snap.duckdb")+"?access_mode=READ_ONLY")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int64
		if err := db.QueryRow("SELECT count(DISTINCT job_key) FROM expected").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	planAndIngest(t, l, dir, generate(rand.New(rand.NewPCG(3, 3)), 20, 1, 1), 0)
	out := filepath.Join(dir, "out", "snap.duckdb")
	res, err := Catalog(ctx, l, out, o, CatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Kind != "snapshot" || res.OpenFrom != "" {
		t.Fatalf("catalog of a mem:// lake: %+v, want a snapshot", res)
	}
	planAndIngest(t, l, dir, generate(rand.New(rand.NewPCG(4, 4)), 25, 1, 1), 0)
	if n := jobs(); n != 1 {
		t.Fatalf("snapshot before refresh sees %d jobs, want the 1 it was written with", n)
	}
	if _, err := Catalog(ctx, l, out, o, CatalogOptions{Refresh: true}); err != nil {
		t.Fatal(err)
	}
	if n := jobs(); n != 2 {
		t.Errorf("refreshed snapshot sees %d jobs, want 2", n)
	}
}

// TestLiveCatalogRefusesGlobPaths: a live catalog's views read the lake by
// globs, so a path holding a glob character is refused as bad usage rather
// than read as a pattern.
func TestLiveCatalogRefusesGlobPaths(t *testing.T) {
	ctx := context.Background()
	l, _, dir := smallLake(t)
	odd, err := lake.Open(ctx, filepath.Join(dir, "la[ke"))
	if err != nil {
		t.Fatal(err)
	}
	defer odd.Close()
	for _, c := range []struct {
		name string
		l    *lake.Lake
		out  string
	}{
		{"catalog name", l, filepath.Join(dir, "a[1].duckdb")},
		{"lake folder", odd, filepath.Join(dir, "c.duckdb")},
	} {
		if _, err := Catalog(ctx, c.l, c.out, EngineOptions{Threads: 1, TempDir: dir}, CatalogOptions{}); !errors.Is(err, errkind.ErrBadInput) {
			t.Errorf("%s: catalog --out %q: %v, want a usage error", c.name, c.out, err)
		}
	}
	// A glob character in the catalog's own folder is no part of the views'
	// paths: that catalog works.
	if _, err := Catalog(ctx, l, filepath.Join(dir, "star*", "c.duckdb"), EngineOptions{Threads: 1, TempDir: dir}, CatalogOptions{}); err != nil {
		t.Errorf("catalog in a folder named star*: %v", err)
	}
}

// TestCatalogReplacesOnlyItsOwn: --out names a file that is there: a catalog
// batchlake wrote is written again; any other file (text, or the analyst's
// own DuckDB database) is refused as bad input and left as it was.
func TestCatalogReplacesOnlyItsOwn(t *testing.T) {
	ctx := context.Background()
	l, _, dir := smallLake(t)
	o := EngineOptions{Threads: 1, TempDir: dir}
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(dir, "own.duckdb")
	c, err := duckdb.NewConnector(own, nil)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	if _, err := db.ExecContext(ctx, "CREATE TABLE mine AS SELECT 42 AS answer"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, path := range []string{text, own} {
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Catalog(ctx, l, path, o, CatalogOptions{})
		if !errors.Is(err, errkind.ErrBadInput) || !strings.Contains(err.Error(), "is not a catalog batchlake wrote") {
			t.Errorf("catalog --out %s: %v, want bad input", filepath.Base(path), err)
		}
		if after, err := os.ReadFile(path); err != nil || string(after) != string(before) {
			t.Errorf("catalog --out %s changed the file (%v)", filepath.Base(path), err)
		}
	}
	out := filepath.Join(dir, "analytics.duckdb")
	for i := range 2 {
		if _, err := Catalog(ctx, l, out, o, CatalogOptions{}); err != nil {
			t.Fatalf("catalog written %d times: %v", i+1, err)
		}
	}
}
