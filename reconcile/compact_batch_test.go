package reconcile

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// A compaction reads its live jobs a batch at a time and each statement
// reads a bounded number of table files; the views over it are the views
// read live, and verify finds it true.
func TestCompactionInBatches(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	planJobs(t, ctx, l, dir, 0, 5, 3)
	live := viewRows(t, ctx, l)

	var jobs []int
	files := map[string][]int{} // the files of each statement, by view source
	compactRead = func(table string, n int) {
		if table == "" {
			jobs = append(jobs, n)
		} else {
			files[table] = append(files[table], n)
		}
	}
	defer func() { compactRead = nil }()
	eo := EngineOptions{Threads: 1, TempDir: t.TempDir(), CompactJobs: 2, CompactFiles: 2}
	res, err := Compact(ctx, l, eo, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Jobs != 5 || res.Segments != 1 {
		t.Fatalf("compaction covers %d jobs in %d segments, want 5 in 1", res.Jobs, res.Segments)
	}
	// 5 jobs 2 at a time; a statement reads 2 files at most, so every view
	// source (an empty file of its schema and a file a batch at least) is
	// copied in parts first.
	if fmt.Sprint(jobs) != "[2 2 1]" {
		t.Errorf("jobs read in batches of %v, want [2 2 1]", jobs)
	}
	for table := range res.Tables {
		ns := files[table]
		if len(ns) < 2 || slices.Max(ns) > 2 {
			t.Errorf("%s: statements read %v table files, want more than one statement, 2 files at most each", table, ns)
		}
	}
	if got := viewRows(t, ctx, l); got != live {
		t.Errorf("views over the compaction differ from the live views:\n got %.1500s\nwant %.1500s", got, live)
	}
	if ps, err := VerifyCompactions(ctx, l, eo); err != nil || len(ps) > 0 {
		t.Fatalf("verify: problems %+v, err %v", ps, err)
	}

	// Two new jobs: read in one batch, the first segment kept.
	planJobs(t, ctx, l, dir, 5, 2, 3)
	live = viewRows(t, ctx, l)
	jobs = nil
	again, err := Compact(ctx, l, eo, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.Jobs != 7 || again.Segments != 2 || fmt.Sprint(jobs) != "[2]" {
		t.Errorf("second compaction covers %d jobs in %d segments, its jobs read in batches of %v; want 7 in 2, [2]", again.Jobs, again.Segments, jobs)
	}
	if got := viewRows(t, ctx, l); got != live {
		t.Errorf("views over the second compaction differ from the live views:\n got %.1500s\nwant %.1500s", got, live)
	}

	// A forged compaction, its second segment's expected rows those of the
	// first: verify in batches finds what it finds at once.
	var c lake.Compaction
	if err := l.GetJSON(ctx, again.Key, lake.FormatCompaction, &c); err != nil {
		t.Fatal(err)
	}
	c.CreatedAt = c.CreatedAt.Add(time.Hour)
	c.Segments[1].Tables["expected"] = c.Segments[0].Tables["expected"]
	if _, err := l.PutCompaction(ctx, &c); err != nil {
		t.Fatal(err)
	}
	inBatches, err := VerifyCompactions(ctx, l, eo)
	if err != nil {
		t.Fatal(err)
	}
	atOnce, err := VerifyCompactions(ctx, l, EngineOptions{Threads: 1, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// 5 jobs' 3 rows twice, the 2 new jobs' rows missing.
	want := []lake.Problem{{Key: atOnce[0].Key, Severity: lake.SeverityError,
		Message: "compaction table expected: 21 rows differ from its jobs' sources (run batchlake compact again; sessions must not use it)"}}
	if !reflect.DeepEqual(atOnce, want) || !reflect.DeepEqual(inBatches, want) {
		t.Errorf("verify of the forged compaction:\nin batches %+v\n   at once %+v\n      want %+v", inBatches, atOnce, want)
	}
}

// TestCompactionReadsGroups: a compaction's statements over enough files
// read them in groups of one schema (compactScan), and the views over the
// compaction equal the live views.
func TestCompactionReadsGroups(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	planJobs(t, ctx, l, dir, 0, 4, 1)
	live := viewRows(t, ctx, l)
	defer func(n int) { groupedScanFiles = n }(groupedScanFiles)
	groupedScanFiles = 2
	compactAndCompare(t, ctx, l, EngineOptions{Threads: 1, TempDir: t.TempDir(), CompactFiles: 3}, live)
}

// TestCompactionOfTwoTableFormats: a lake whose costs and outcomes files
// are of two table formats (testdata/lake-v1, one job reconciled again by
// this code) is compacted with its files read in groups of one schema, two
// groups a view source; the views over the compaction equal the live ones,
// and verify, comparing them in the compaction's column order, finds it true.
func TestCompactionOfTwoTableFormats(t *testing.T) {
	ctx := context.Background()
	dir := copyTree(t, filepath.Join("..", "testdata", "lake-v1"))
	l, err := lake.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	keys, err := l.JobKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		m, err := l.GetManifest(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if m.Attempt == 1 {
			if _, err := Run(ctx, l, Options{JobKey: m.JobKey, MaxAttempts: 7, TmpDir: t.TempDir(), Engine: EngineOptions{Threads: 1}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var kinds int64
	queryOne(t, "SELECT count(DISTINCT type) FROM parquet_schema("+quote(filepath.Join(dir, "tables", "costs", "**", "*.parquet"))+") WHERE name = 'cost_usd'", &kinds)
	if kinds != 2 {
		t.Fatalf("cost_usd has %d physical types in the costs files, want 2", kinds)
	}
	live := viewRows(t, ctx, l)
	defer func(n int) { groupedScanFiles = n }(groupedScanFiles)
	groupedScanFiles = 2
	compactAndCompare(t, ctx, l, EngineOptions{Threads: 1, TempDir: t.TempDir()}, live)
}

// planJobs plans n jobs of records lines each, tenants t0 and t1 in turn,
// one shard a record; job i's inputs differ from every other job's.
func planJobs(t *testing.T, ctx context.Context, l *lake.Lake, dir string, from, n, records int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		var lines []string
		for r := range records {
			lines = append(lines, fmt.Sprintf(`{"custom_id":"r%d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"job %d"}]}}`, r, i))
		}
		if _, err := ingest.Plan(ctx, l, ingest.PlanOptions{Provider: "openai", TmpDir: dir, Tenant: fmt.Sprintf("t%d", i%2), PromptVersion: "p1",
			ShardMaxRecords: 1, Input: writeLines(t, dir, fmt.Sprintf("job%d.jsonl", i), lines)}); err != nil {
			t.Fatal(err)
		}
	}
}

// compactAndCompare compacts the lake with eo and fails t unless the views
// over it equal live (viewRows before) and verify finds it true.
func compactAndCompare(t *testing.T, ctx context.Context, l *lake.Lake, eo EngineOptions, live string) {
	t.Helper()
	if _, err := Compact(ctx, l, eo, nil); err != nil {
		t.Fatal(err)
	}
	if got := viewRows(t, ctx, l); got != live {
		t.Errorf("views over the compaction differ from the live views:\n got %.1500s\nwant %.1500s", got, live)
	}
	if ps, err := VerifyCompactions(ctx, l, eo); err != nil || len(ps) > 0 {
		t.Fatalf("verify: problems %+v, err %v", ps, err)
	}
}

// viewRows is every row of the views a compaction holds the sources of,
// sorted, and whether a compaction is read.
func viewRows(t *testing.T, ctx context.Context, l *lake.Lake) string {
	t.Helper()
	e, err := OpenSession(ctx, l, EngineOptions{Threads: 1, TempDir: t.TempDir()}, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var b strings.Builder
	for _, v := range []string{"manifests", "shards", "expected", "attempts", "quarantine", "outcomes", "costs", "ledger", "ingests", "batches", "report_files"} {
		rows, err := e.Query(ctx, "SELECT * FROM "+v+" ORDER BY ALL")
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		cols, _ := rows.Columns()
		fmt.Fprintln(&b, v, cols)
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		n := 0
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(&b, vals...)
			n++
		}
		rows.Close()
		if n == 0 && (v == "manifests" || v == "expected" || v == "ledger") {
			t.Fatalf("view %s is empty", v)
		}
	}
	return b.String()
}
