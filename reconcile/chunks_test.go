package reconcile

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// TestChunkedTablesEqualWhole: the outcomes and costs files read in many
// small ranges, from tables sorted in many small steps, are byte for byte the
// files of one range and one sort each; so too over a job whose expected
// table is split into many files (the outcomes follow their order), and
// there classified a few buckets at a time (EngineOptions.GroupRecords).
func TestChunkedTablesEqualWhole(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 11))
	g := generate(rng, 120, 3, 1) // every record its own range at 1 row; a few ranges at 50
	for _, splitMin := range []int64{-1, 1} {
		t.Run(fmt.Sprintf("split%d", splitMin), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ctx := context.Background()
			run := func(name string, rows, group int64) (*Report, map[string][]byte) {
				t.Helper()
				l, err := lake.Open(ctx, filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				m := planAndIngestSplit(t, l, dir, g, 40, splitMin)
				if (m.ExpectedSplit > 1) != (splitMin > 0) {
					t.Fatalf("expected table split in %d files, planned with split minimum %d", m.ExpectedSplit, splitMin)
				}
				var e *Engine
				o := Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 2, CacheDir: filepath.Join(dir, "cache-"+name),
					ChunkRows: rows, SortRows: rows, SortInSteps: rows < 1<<40, GroupRecords: group, OnOpen: func(s *Engine) { e = s }}}
				rep, err := Run(ctx, l, o)
				if err != nil {
					t.Fatal(err)
				}
				want := 0 // whole
				if splitMin > 0 && group < 1<<40 {
					if want = groupCount(m.ExpectedRecords, m.ExpectedSplit, group); want < 2 {
						t.Fatalf("%s: %d records in %d buckets, %d a group: %d groups, want several", name, m.ExpectedRecords, m.ExpectedSplit, group, want)
					}
				}
				if e == nil {
					t.Fatalf("%s: no session opened", name)
				}
				if e.groups != want {
					t.Fatalf("%s: %d records in %d buckets, %d a group: classified in %d groups (0: whole), want %d", name, m.ExpectedRecords, m.ExpectedSplit, group, e.groups, want)
				}
				return rep, objectsOf(t, l, rep)
			}
			want, wantObjs := run("whole", 1<<40, 1<<40)
			if want.OutcomesFile == "" || want.CostsFile == "" {
				t.Fatalf("no tables written: %+v", want)
			}
			sizes := []int64{1, 7, 50}
			if testing.Short() {
				sizes = []int64{1, 50} // -short: every record its own range, and ranges of many; the full run adds 7
			}
			type variant struct{ rows, group int64 }
			vs := []variant{{1 << 40, 10}, {1 << 40, 40}}
			for _, rows := range sizes {
				vs = append(vs, variant{rows, 1 << 40}, variant{rows, 25})
			}
			for _, v := range vs {
				got, objs := run(fmt.Sprintf("chunk%d-group%d", v.rows, v.group), v.rows, v.group)
				if got.OutcomesFile != want.OutcomesFile || got.CostsFile != want.CostsFile {
					t.Errorf("%d rows a range, %d records a group: tables %s, %s; in one range %s, %s", v.rows, v.group, got.OutcomesFile, got.CostsFile, want.OutcomesFile, want.CostsFile)
				}
				if gc, wc := got.counts(), want.counts(); gc != wc {
					t.Errorf("%d rows a range, %d records a group: counts %s, whole %s", v.rows, v.group, gc, wc)
				}
				for k, b := range wantObjs {
					if !bytes.Equal(objs[k], b) {
						t.Errorf("%d rows a range, %d records a group: object %s differs", v.rows, v.group, k)
					}
				}
			}
		})
	}
}

// TestOutcomesPairChecked: the outcomes table pairs each expected row with
// the outcome at its position; an outcome table whose positions do not
// match its records (two records' outcomes swapped, a row missing or twice,
// an outcome of another custom_id at a record's position)
// fails the write loudly instead of writing another record's outcome. So do
// cost lines that do not add up to their record's outcome (costs: a line's
// cost changed, a line lost, a line moved to another record or to none), or
// that come out of the costs table's order.
func TestOutcomesPairChecked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := generate(rand.New(rand.NewPCG(3, 9)), 40, 3, 1)
	for _, c := range []struct {
		name, tamper, want string
		costs              bool // tamper with costed, after costLines
		part               bool // write a partition's partial files
	}{
		{"cost-changed", `UPDATE costed SET cost_usd = cost_usd + 1 WHERE pos = (SELECT min(pos) FROM costed)`, "cost rows of", true, false},
		{"cost-lost", `DELETE FROM costed WHERE pos = (SELECT min(pos) FROM costed)`, "has 0 cost rows of 0 USD, its outcome 1 lines", true, false},
		{"cost-moved", `UPDATE costed SET pos = pos + 1 WHERE pos = (SELECT max(pos) FROM costed WHERE pos < (SELECT max(pos) FROM outcomes WHERE lines = 0))`, "its outcome", true, false},
		{"cost-unknown", `UPDATE costed SET pos = NULL, custom_id = 'x' WHERE pos = (SELECT max(pos) FROM costed)`, "has 0 cost rows of 0 USD", true, false},
		{"cost-order", `UPDATE costed SET line_no = 0 WHERE pos = (SELECT max(pos) FROM costed WHERE pos IN (SELECT pos FROM costed GROUP BY pos HAVING count(*) > 1))`, "out of order", true, false},
		{"swapped", `UPDATE outcomes SET pos = CASE WHEN pos = (SELECT min(pos) FROM outcomes) THEN (SELECT max(pos) FROM outcomes)
		             ELSE (SELECT min(pos) FROM outcomes) END
		             WHERE pos IN ((SELECT min(pos) FROM outcomes), (SELECT max(pos) FROM outcomes))`, "does not pair with its outcome", false, false},
		{"missing", `DELETE FROM outcomes WHERE pos = (SELECT min(pos) + 3 FROM outcomes)`, "has 39 outcomes for its rows 0 to 39", false, false},
		{"last-missing", `DELETE FROM outcomes WHERE pos = (SELECT max(pos) FROM outcomes)`, "expected file 1 has 40 rows, its outcomes 39", false, false},
		{"other-record", `UPDATE outcomes SET custom_id = custom_id || 'x' WHERE pos = (SELECT min(pos) + 5 FROM outcomes)`, "row 5 (record", false, false},
		{"twice", `UPDATE outcomes SET pos = pos - 1 WHERE pos = (SELECT min(pos) + 3 FROM outcomes)`, "two outcomes of expected file 1 row 2", false, false},
		{"untampered", ``, "", false, false},
		// A partition's partial files (writePartials): partition 1 of 3 of
		// an unsplit job, whose file has every partition's rows.
		{"part-untampered", ``, "", false, true},
		{"part-missing", `DELETE FROM outcomes WHERE pos = (SELECT min(pos) FROM outcomes WHERE pos > (SELECT min(pos) FROM outcomes))`, "has no outcome", false, true},
		{"part-swapped", `UPDATE outcomes SET pos = CASE WHEN pos = (SELECT min(pos) FROM outcomes) THEN (SELECT max(pos) FROM outcomes)
		             ELSE (SELECT min(pos) FROM outcomes) END
		             WHERE pos IN ((SELECT min(pos) FROM outcomes), (SELECT max(pos) FROM outcomes))`, "does not pair with its outcome", false, true},
		{"part-cost-lost", `DELETE FROM costed WHERE pos = (SELECT min(pos) FROM costed)`, "has 0 cost rows of 0 USD, its outcome 1 lines", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l, dir := testLake(t)
			m := planAndIngest(t, l, dir, g, 0)
			o := Options{JobKey: m.JobKey, TmpDir: dir, MaxAttempts: 3, Engine: EngineOptions{Threads: 2, CacheDir: filepath.Join(dir, "cache")}}
			var part *lake.Partition
			if c.part {
				part = &lake.Partition{K: 1, N: 3}
			}
			in, e := stagedEngine(t, l, &o, part)
			if err := classify(ctx, e, in.gateSQL, false, 3, nil); err != nil {
				t.Fatal(err)
			}
			tamper := func() {
				if err := e.Exec(ctx, "tamper", []string{c.tamper}); err != nil {
					t.Fatal(err)
				}
			}
			if c.tamper != "" && !c.costs {
				tamper()
			}
			if err := costLines(ctx, e); err != nil {
				t.Fatal(err)
			}
			if c.costs {
				tamper()
			}
			var err error
			if c.part {
				var records int64
				if err := e.DB.QueryRowContext(ctx, "SELECT count(*) FROM expected").Scan(&records); err != nil {
					t.Fatal(err)
				}
				if records == 0 || records == int64(len(g.input)) {
					t.Fatalf("partition %s holds %d of the job's %d records", part, records, len(g.input))
				}
				_, _, err = writePartials(ctx, e, l, m, in.job, *part, records)
			} else {
				_, _, err = writeTables(ctx, e, l, m, in.job, dir, false, true, nil)
			}
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("tables: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("tables over outcomes %s: %v, want an error saying %q", c.name, err, c.want)
			}
		})
	}
}

// stagedEngine prepares a reconcile of o.JobKey (partition part of it, if
// not nil) and opens an engine with its sources staged and its rules and
// prices loaded, as Run does before it classifies; the engine is closed when
// the test ends.
func stagedEngine(t *testing.T, l *lake.Lake, o *Options, part *lake.Partition) (*runInputs, *Engine) {
	t.Helper()
	ctx := context.Background()
	in, err := prepare(ctx, l, o)
	if err != nil {
		t.Fatal(err)
	}
	e, err := OpenEngine(l, o.Engine)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := in.stage(ctx, e, *o, &Report{}, part); err != nil {
		t.Fatal(err)
	}
	return in, e
}

// TestGroupCount: a split job is classified whole up to two groups' worth of
// records, then in the fewest groups that divide its buckets evenly and hold
// about the records asked for or fewer each.
func TestGroupCount(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n     int64
		split int
		per   int64
		want  int
	}{
		{10_000_000, 0, 1_250_000, 1}, // not split
		{10_000_000, 1, 1_250_000, 1}, // one bucket
		{1_000_000, 16, 1_250_000, 1}, // one group would do
		{2_500_000, 16, 1_250_000, 1}, // two would
		{2_500_001, 16, 1_250_000, 4}, // three would: the next divisor of 16
		{3_000_000, 16, 1_250_000, 4},
		{10_000_000, 16, 1_250_000, 8},
		{10_000_001, 16, 1_250_000, 16},  // nine would
		{100_000_000, 16, 1_250_000, 16}, // never more groups than buckets
		{120, 16, 10, 16},
		{120, 16, 25, 8},
		{120, 16, 40, 4},
		{120, 12, 25, 6}, // 5 do not divide 12
		{120, 16, 0, 1},
	} {
		if got := groupCount(c.n, c.split, c.per); got != c.want {
			t.Errorf("groupCount(%d, %d, %d) = %d, want %d", c.n, c.split, c.per, got, c.want)
		}
	}
}

// TestGroupsOverAttemptsSplitBySize: a job whose result files' attempts are
// split by their size is still classified a few buckets at a time when every
// attempts file is split in a multiple of the groups (each group reads its
// files whole), and whole when one file is not; either way its tables are
// those of the job classified whole.
func TestGroupsOverAttemptsSplitBySize(t *testing.T) {
	t.Parallel()
	g := generate(rand.New(rand.NewPCG(5, 11)), 120, 3, 1)
	size := func(lines []string) int64 { return int64(len(strings.Join(lines, "\n"))) + 1 }
	smaller, larger := min(size(g.output), size(g.errors)), max(size(g.output), size(g.errors))
	dir := t.TempDir()
	ctx := context.Background()
	run := func(name string, splitMinBytes, group int64) (*Report, map[string][]byte, int, []lake.TableFile) {
		t.Helper()
		l, err := lake.Open(ctx, filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		m := planAndIngestSized(t, l, dir, g, 40, 1, splitMinBytes)
		recs, err := l.IngestRecords(ctx, mustDigest(m.JobKey))
		if err != nil {
			t.Fatal(err)
		}
		var files []lake.TableFile
		for _, r := range recs {
			files = append(files, r.AttemptTables()...)
		}
		var e *Engine
		rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 2, CacheDir: filepath.Join(dir, "cache-"+name),
			GroupRecords: group, OnOpen: func(s *Engine) { e = s }}})
		if err != nil {
			t.Fatal(err)
		}
		return rep, objectsOf(t, l, rep), e.groups, files
	}
	want, wantObjs, _, _ := run("whole", -1, 1<<40)
	for _, c := range []struct {
		name          string
		splitMinBytes int64
		groups        int
	}{
		{"every file in four or more", smaller / 4, 4},
		{"files of any rows", larger + 1, 0},
	} {
		got, objs, groups, files := run(c.name, c.splitMinBytes, 40)
		for _, f := range files {
			if f.Split == lake.SplitBuckets || c.groups > 0 && (f.Split < 4 || f.Split%4 != 0) || c.groups == 0 && f.Split != 0 {
				t.Fatalf("%s: an attempts file split in %d", c.name, f.Split)
			}
		}
		if groups != c.groups {
			t.Errorf("%s: classified in %d groups (0: whole), want %d", c.name, groups, c.groups)
		}
		if got.OutcomesFile != want.OutcomesFile || got.CostsFile != want.CostsFile || got.counts() != want.counts() {
			t.Errorf("%s: tables %s, %s, counts %s; classified whole %s, %s, %s", c.name, got.OutcomesFile, got.CostsFile, got.counts(), want.OutcomesFile, want.CostsFile, want.counts())
		}
		for k, b := range wantObjs {
			if !bytes.Equal(objs[k], b) {
				t.Errorf("%s: object %s differs", c.name, k)
			}
		}
	}
}

// TestSizedSplitBelowGroups: the jobs whose result files' attempts ingest
// splits by size are those reconcile classifies whole by default; a larger
// job's are split as its records are, so that its groups read them whole.
func TestSizedSplitBelowGroups(t *testing.T) {
	if g := groupCount(ingest.SizedSplitMaxRecords, lake.SplitBuckets, defaultGroupRecords); g != 1 {
		t.Errorf("a job of %d records is classified in %d groups, but ingest splits its result files by size", ingest.SizedSplitMaxRecords, g)
	}
	if g := groupCount(ingest.SizedSplitMaxRecords+1, lake.SplitBuckets, defaultGroupRecords); g < 2 {
		t.Errorf("a job of %d records is classified whole: ingest could split its result files by size", ingest.SizedSplitMaxRecords+1)
	}
}
