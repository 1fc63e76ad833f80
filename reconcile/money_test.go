package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// queryOne runs a one-row query in a plain DuckDB and scans it.
func queryOne(t *testing.T, q string, dest ...any) {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(q).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// TestMoneyInParquetIsDecimal: the cost_usd columns of the outcomes and costs
// files are DECIMAL(38, 18), so a DuckDB that knows nothing of batchlake sums
// them straight from the files, to exactly the report's total. In table
// format 1 they were text and sum(cost_usd) failed ("sum(VARCHAR)").
func TestMoneyInParquetIsDecimal(t *testing.T) {
	ctx := context.Background()
	l, m, dir := smallLake(t)
	rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.CostUSD["total"] == "0" {
		t.Fatal("the job cost nothing: the sums below would prove nothing")
	}
	files := func(table string) string {
		return quote(filepath.Join(dir, "lake", "tables", table, "**", "*.parquet"))
	}
	for _, c := range []struct {
		table, want string
	}{
		{"costs", string(rep.CostUSD["total"])},
		// Outcomes hold the known records' costs: all but unattributed lines.
		{"outcomes", mustSub(t, string(rep.CostUSD["total"]), string(rep.CostUSD["unattributed"]))},
	} {
		t.Run(c.table, func(t *testing.T) {
			var typ, sum, physical, createdBy string
			queryOne(t, "SELECT typeof(sum(cost_usd)), CAST(sum(cost_usd) AS VARCHAR) FROM read_parquet("+files(c.table)+")", &typ, &sum)
			if typ != "DECIMAL(38,18)" || trimDecimal(sum) != c.want {
				t.Errorf("sum(cost_usd) over the %s files: %s %s, want DECIMAL(38,18) %s", c.table, typ, sum, c.want)
			}
			queryOne(t, "SELECT any_value(type) || ' ' || any_value(logical_type) FROM parquet_schema("+files(c.table)+") WHERE name = 'cost_usd'", &physical)
			if !strings.HasPrefix(physical, "FIXED_LEN_BYTE_ARRAY") || !strings.Contains(physical, "precision=38") || !strings.Contains(physical, "scale=18") {
				t.Errorf("cost_usd in the %s files is %s, want a FIXED_LEN_BYTE_ARRAY DECIMAL(38,18)", c.table, physical)
			}
			queryOne(t, "SELECT any_value(created_by) FROM parquet_file_metadata("+files(c.table)+")", &createdBy)
			if want := fmt.Sprintf("batchlake version %d(", lake.TableVersion); !strings.HasPrefix(createdBy, want) {
				t.Errorf("created_by %q, want the table format's version: %s", createdBy, want)
			}
		})
	}
}

func mustSub(t *testing.T, a, b string) string {
	t.Helper()
	x, y := NewDecimal(), NewDecimal()
	if err := x.Add(a); err != nil {
		t.Fatal(err)
	}
	if err := y.Add("-" + strings.TrimPrefix(b, "-")); err != nil {
		t.Fatal(err)
	}
	x.v.Add(x.v, y.v)
	return x.String()
}

// copyTree copies a lake fixture into a writable temporary folder.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o444)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestTableFormat1LakeReads: a lake written by table format 1 (cost_usd as
// text; testdata/lake-v1, see testdata/lake-v1.md) still reads: verify finds
// nothing wrong, the views give money as DECIMAL(38, 18) with the sums the
// reports hold, and once a job is reconciled again by this code (format 2
// files beside format 1 files) the views read both.
func TestTableFormat1LakeReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := copyTree(t, filepath.Join("..", "testdata", "lake-v1"))
	var typ string
	queryOne(t, "SELECT typeof(any_value(cost_usd)) FROM read_parquet("+quote(filepath.Join(dir, "tables", "costs", "**", "*.parquet"))+")", &typ)
	if typ != "VARCHAR" {
		t.Fatalf("the fixture's cost_usd is %s: it is not a table format 1 lake", typ)
	}
	l, err := lake.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tmp := t.TempDir()
	keys, err := l.JobKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []*lake.Manifest
	var first *lake.Manifest
	for _, k := range keys {
		m, err := l.GetManifest(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, m)
		if m.Attempt == 1 {
			first = m
		}
	}
	if len(jobs) < 2 || first == nil {
		t.Fatalf("fixture has %d jobs, want a first attempt and a retry", len(jobs))
	}
	// What the views must sum to: the latest report of every job.
	want := func() string {
		sum := NewDecimal()
		for _, m := range jobs {
			k, err := lake.LatestReportKey(ctx, l, m)
			if err != nil {
				t.Fatal(err)
			}
			var r Report
			if err := l.GetJSON(ctx, k, lake.FormatReport, &r); err != nil {
				t.Fatal(err)
			}
			if err := sum.Add(string(r.CostUSD["total"])); err != nil {
				t.Fatal(err)
			}
		}
		return sum.String()
	}
	check := func(t *testing.T) {
		t.Helper()
		if v, err := lake.Verify(ctx, l); err != nil || !v.OK() {
			t.Fatalf("verify: %v %+v", err, v.Problems)
		}
		e, err := OpenSession(ctx, l, EngineOptions{Threads: 1, TempDir: tmp}, Scope{})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		var costsType, costs, recordsType, records, outcomes string
		if err := e.DB.QueryRowContext(ctx, `SELECT
			(SELECT typeof(sum(cost_usd)) FROM costs), (SELECT CAST(sum(cost_usd) AS VARCHAR) FROM costs),
			(SELECT typeof(sum(cost_usd)) FROM records), (SELECT CAST(sum(cost_usd) AS VARCHAR) FROM records),
			(SELECT CAST(sum(cost_usd) AS VARCHAR) FROM outcomes)`).Scan(&costsType, &costs, &recordsType, &records, &outcomes); err != nil {
			t.Fatal(err)
		}
		if w := want(); costsType != "DECIMAL(38,18)" || recordsType != "DECIMAL(38,18)" || trimDecimal(costs) != w {
			t.Errorf("costs: %s %s, records: %s; want DECIMAL(38,18) summing to the reports' %s", costsType, costs, recordsType, w)
		}
		if records != outcomes {
			t.Errorf("records sum to %s, outcomes to %s", records, outcomes)
		}
	}
	t.Run("format 1 only", check)
	// retry reads the outcomes files in Go (lake.Succeeded): every record of
	// the fixture succeeded in one of its two generations.
	t.Run("succeeded records", func(t *testing.T) {
		ids, err := lake.RecordIDs(ctx, l, first)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := lake.Succeeded(ctx, l, jobs, ids)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) == 0 || len(ok) != len(ids) {
			t.Errorf("lake.Succeeded found %d of the fixture's %d records succeeded, want all", len(ok), len(ids))
		}
	})

	// Reconcile the first job again with other settings: a new run, whose
	// outcomes and costs files are format 2. Its expected rows (format 1) do
	// not say where the records' lines start in their shards: the retry reads
	// the shards whole.
	rep, err := Run(ctx, l, Options{JobKey: first.JobKey, MaxAttempts: 7, TmpDir: tmp, Engine: EngineOptions{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.RetryRecords == 0 || len(rep.RetryShards) == 0 || rep.RetryLineage == "" {
		t.Fatalf("the first job again: %d records to retry in shards %v (lineage %q), want a retry", rep.RetryRecords, rep.RetryShards, rep.RetryLineage)
	}
	var kinds int64
	queryOne(t, "SELECT count(DISTINCT type) FROM parquet_schema("+quote(filepath.Join(dir, "tables", "costs", "**", "*.parquet"))+") WHERE name = 'cost_usd'", &kinds)
	if kinds != 2 {
		t.Fatalf("cost_usd has %d physical types in the costs files, want 2 (format 1 text, format 2 decimal)", kinds)
	}
	t.Run("formats 1 and 2", check)
}
