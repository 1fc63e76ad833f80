package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

// normalised renders a report without what may differ between two runs of
// the same reconcile: its time and whether it was new.
func normalised(t *testing.T, r *Report) string {
	t.Helper()
	c := *r
	c.ReconciledAt, c.Unchanged = time.Time{}, false
	b, err := json.MarshalIndent(&c, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// objectsOf returns the bytes of every content-addressed object a report names.
func objectsOf(t *testing.T, l *lake.Lake, r *Report) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	keys := append([]string{r.OutcomesFile, r.CostsFile, r.RetryLineage}, r.RetryShards...)
	for _, k := range keys {
		if k == "" {
			continue
		}
		b, err := l.GetVerified(context.Background(), k, mustKey(t, k))
		if err != nil {
			t.Fatalf("read %s: %v", k, err)
		}
		out[k] = b
	}
	return out
}

func mustKey(t *testing.T, k string) lake.Digest {
	d, ok := lake.ParseObjectKey(k)
	if !ok {
		t.Fatalf("not a content-addressed key: %s", k)
	}
	return d
}

// shardStates lists each shard's ledger states of a job, in order.
func shardStates(t *testing.T, l *lake.Lake, m *lake.Manifest) string {
	t.Helper()
	g := lake.NewLedger(l, "")
	job, _ := lake.ParseDigest(m.JobKey)
	var b strings.Builder
	for _, s := range m.Shards {
		evs, err := g.Events(context.Background(), job, s.ShardID)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:", s.ShardID)
		for _, e := range evs {
			b.WriteString(" " + string(e.State))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestPartitionMergeEqualsSingleRun: for random batches with every kind of
// defect (unknown ids, duplicates, quarantined lines, missing records), a
// reconcile split into n partitions (run concurrently) and merged writes
// exactly what a single reconcile writes — the same report (but its time),
// the same outcomes and costs tables, retry shards and lineage, byte for
// byte under the same keys — and leaves the same ledger states.
func TestPartitionMergeEqualsSingleRun(t *testing.T) {
	t.Parallel()
	seeds := 3
	if testing.Short() {
		seeds = 1 // -short: one random batch split four ways; the full run tries three
	}
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			g := generate(rng, 30+rng.IntN(250), 1+rng.IntN(5), rng.IntN(3))
			shardMax := 1 + rng.IntN(100)
			dir := t.TempDir()
			// Every lake plans and ingests the same files, so the job, its
			// files and the run's identity are the same in each.
			newLake := func(name string, splitMin, splitMinBytes int64) (*lake.Lake, *lake.Manifest) {
				url := filepath.Join(dir, name)
				if seed%2 == 1 {
					url = "mem://" // a remote-style lake: DuckDB reads through the cache
				}
				l, err := lake.Open(ctx, url)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				m := planAndIngestSized(t, l, dir, g, shardMax, splitMin, splitMinBytes)
				if split := m.ExpectedSplit > 0; split != (splitMin > 0) {
					t.Fatalf("lake %s: expected table split %d, planned with split minimum %d", name, m.ExpectedSplit, splitMin)
				}
				return l, m
			}
			opts := func(m *lake.Manifest) Options {
				o := Options{JobKey: m.JobKey, MaxAttempts: 2 + seed%2, TmpDir: dir, Engine: EngineOptions{Threads: 1, CacheDir: filepath.Join(dir, "cache")}}
				if seed == 2 {
					// The retry policy's caps act per record inside each partition.
					o.Caps = Caps{Tokens: 1}
				}
				return o
			}
			single, sm := newLake("single", -1, -1)
			want, err := Run(ctx, single, opts(sm))
			if err != nil {
				t.Fatal(err)
			}
			if want.Unknown == 0 || want.Expected == 0 {
				t.Fatalf("generator made no unknown ids: %+v", want)
			}
			if seed == 2 && want.CappedRecords == 0 {
				t.Fatalf("seed 2 sends no record to manual by the token cap: %+v", want)
			}
			wantObjs := objectsOf(t, single, want)
			wantLedger := shardStates(t, single, sm)
			// The outcomes table follows the order of the job's expected
			// files, so a merge over split files is compared with a single
			// run over the same split files.
			splitSingle, ssm := newLake("single-split", 1, -1)
			wantSplit, err := Run(ctx, splitSingle, opts(ssm))
			if err != nil {
				t.Fatal(err)
			}
			wantSplitObjs := objectsOf(t, splitSingle, wantSplit)
			if a, b := wantSplit.counts(), want.counts(); a != b {
				t.Fatalf("a single run over split files counts %s, over one file %s", a, b)
			}

			ns := []int{1, 2, 3, 7}
			if testing.Short() {
				// -short: the degenerate split, an unsplit job and 7
				// partitions straddling the files; the full run adds 2.
				ns = []int{1, 3, 7}
			}
			for _, n := range ns {
				t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
					// The tables split by partition (read only in part, 7
					// partitions straddling the 16 files), but for n 3: an
					// unsplit job, every partition filtering all of it; for
					// n 2 the result files' attempts split by their size,
					// each read whole or filtered.
					splitMin, splitMinBytes := int64(1), int64(-1)
					switch n {
					case 2:
						splitMinBytes = int64(len(strings.Join(g.output, "\n"))) / 4
					case 3:
						splitMin = -1
					}
					l, m := newLake(fmt.Sprintf("part%d", n), splitMin, splitMinBytes)
					if splitMinBytes > 0 {
						recs, err := l.IngestRecords(ctx, mustDigest(m.JobKey))
						if err != nil {
							t.Fatal(err)
						}
						if !slices.ContainsFunc(recs, func(r lake.IngestRecord) bool { return r.AttemptsSplit == 4 }) {
							t.Fatalf("no result file's attempts split in four by its size: %+v", recs)
						}
					}
					o := opts(m)
					results := make([]*PartitionResult, n)
					errs := make([]error, n)
					var wg sync.WaitGroup
					for k := range n {
						wg.Add(1)
						go func() {
							defer wg.Done()
							results[k], errs[k] = RunPartition(ctx, l, o, lake.Partition{K: k, N: n})
						}()
					}
					wg.Wait()
					sum := &Report{}
					cost := map[string]*Decimal{}
					for k, err := range errs {
						if err != nil {
							t.Fatalf("partition %d/%d: %v", k, n, err)
						}
						r := results[k]
						for _, f := range []struct {
							dst *int64
							v   int64
						}{{&sum.Expected, r.Expected}, {&sum.Succeeded, r.Succeeded},
							{&sum.FailedRetryable, r.FailedRetryable}, {&sum.FailedPermanent, r.FailedPermanent}, {&sum.QualityFailed, r.QualityFailed},
							{&sum.Missing, r.Missing}, {&sum.Unknown, r.Unknown}, {&sum.Duplicate, r.Duplicate}, {&sum.Quarantined, r.Quarantined},
							{&sum.RetryRecords, r.RetryRecords}, {&sum.ManualRecords, r.ManualRecords}, {&sum.UnpricedLines, r.UnpricedLines}} {
							*f.dst += f.v
						}
						for c, v := range r.CostUSD {
							if cost[c] == nil {
								cost[c] = NewDecimal()
							}
							if err := cost[c].Add(string(v)); err != nil {
								t.Fatal(err)
							}
						}
						checkPartitionRecords(t, l, m, r)
					}
					// The partitions' counts and costs add up to the single run's.
					if a, b := sum.counts(), want.counts(); a != b {
						t.Errorf("partitions add up to %s, the single run has %s", a, b)
					}
					for c, v := range want.CostUSD {
						if cost[c] == nil || cost[c].String() != string(v) {
							t.Errorf("partitions' cost_usd.%s adds up to %v, the single run has %s", c, cost[c], v)
						}
					}
					if n > 1 && results[0].Expected == want.Expected {
						t.Errorf("partition 0/%d holds every record: the split does nothing", n)
					}
					// The merge reads its tables in small ranges (many of
					// them at this size); its tables must still be those of
					// a single run over the same expected files, byte for
					// byte.
					mo := o
					mo.Engine.ChunkRows = 7
					got, err := Merge(ctx, l, mo, 0)
					if err != nil {
						t.Fatal(err)
					}
					want, wantObjs := want, wantObjs
					if splitMin > 0 {
						want, wantObjs = wantSplit, wantSplitObjs
					}
					if a, b := normalised(t, got), normalised(t, want); a != b {
						t.Fatalf("merged report differs from the single run's:\nmerged %s\nsingle %s", a, b)
					}
					for k, b := range objectsOf(t, l, got) {
						if !bytes.Equal(b, wantObjs[k]) {
							t.Errorf("object %s differs from the single run's", k)
						}
					}
					if s := shardStates(t, l, m); s != wantLedger {
						t.Errorf("ledger after merge:\n%s\nafter a single run:\n%s", s, wantLedger)
					}
					if vr, err := lake.Verify(ctx, l); err != nil || !vr.OK() {
						t.Errorf("verify after merge: %v %v", err, vr.Problems)
					}

					// Again: nothing new.
					before, _ := l.List(ctx, "")
					again, err := RunPartition(ctx, l, o, lake.Partition{K: n - 1, N: n})
					if err != nil || !again.Unchanged || again.Key != results[n-1].Key {
						t.Errorf("partition again: %v unchanged=%v", err, again != nil && again.Unchanged)
					}
					merged, err := Merge(ctx, l, o, n)
					if err != nil || !merged.Unchanged || merged.Report != got.Report {
						t.Errorf("merge again: %v", err)
					}
					if after, _ := l.List(ctx, ""); len(after) != len(before) {
						t.Errorf("running again wrote %d keys", len(after)-len(before))
					}
				})
			}
		})
	}
}

func (r *Report) counts() string {
	return fmt.Sprintf("expected=%d succeeded=%d failed_retryable=%d failed_permanent=%d quality_failed=%d missing=%d unknown=%d duplicate=%d quarantined=%d retry=%d manual=%d unpriced=%d",
		r.Expected, r.Succeeded, r.FailedRetryable, r.FailedPermanent, r.QualityFailed, r.Missing, r.Unknown, r.Duplicate, r.Quarantined, r.RetryRecords, r.ManualRecords, r.UnpricedLines)
}

// checkPartitionRecords: every record and line of a partition's outcomes
// and costs falls in that partition by the Go definition (lake.IDPartition
// of its custom_id), the one the SQL filter and the split files must agree
// with, and carries the job's key and tenant (m).
func checkPartitionRecords(t *testing.T, l *lake.Lake, m *lake.Manifest, r *PartitionResult) {
	t.Helper()
	ctx := context.Background()
	e, paths := stagedFiles(t, l, r.OutcomesFile, r.CostsFile)
	for i, path := range paths {
		rows, err := e.DB.QueryContext(ctx, "SELECT custom_id FROM read_parquet("+quote(path)+")")
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for rows.Next() {
			var cid string
			if err := rows.Scan(&cid); err != nil {
				t.Fatal(err)
			}
			if p := lake.IDPartition(cid, r.N); p != r.K {
				t.Errorf("partition %s holds custom_id %q, which Go puts in partition %d", r.Partition, cid, p)
			}
			n++
		}
		rows.Close()
		if i == 0 && n != r.Expected {
			t.Errorf("partition %s outcomes file has %d rows, counts say %d", r.Partition, n, r.Expected)
		}
	}
	// The outcomes table keeps no job_key or tenant (outcomes.sql); the
	// partition file has them on every row all the same, from the manifest.
	var bad int64
	q := "SELECT count(*) FILTER (WHERE job_key IS DISTINCT FROM ? OR tenant IS DISTINCT FROM ?) FROM read_parquet(" + quote(paths[0]) + ")"
	if err := e.DB.QueryRowContext(ctx, q, m.JobKey, m.Tenant).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Errorf("partition %s outcomes file: %d rows without job_key %s and tenant %q", r.Partition, bad, m.JobKey, m.Tenant)
	}
	// Each file has the columns and types the merge reads
	// (merge_sources.sql), those of the files earlier versions wrote with
	// DuckDB, which a merge may read beside these (results stored before an
	// upgrade keep their files); and its rows in the job's tables' order, so
	// that the same partition writes the same bytes: the outcomes by pos, the
	// costs by pos (null last), out_no and line_no, a line with its record's
	// record_id and attempt or with none.
	for i, f := range []struct{ columns, disorder string }{
		{"job_key VARCHAR, tenant VARCHAR, record_id VARCHAR, custom_id VARCHAR, attempt INTEGER, outcome VARCHAR, reason VARCHAR, " +
			"lines BIGINT, disposition VARCHAR, cost_usd DECIMAL(38,18), truncated BOOLEAN, pos BIGINT",
			"SELECT count(*) FILTER (WHERE pos IS NULL OR prev >= pos) FROM (SELECT pos, lag(pos) OVER (ORDER BY file_row_number) AS prev FROM %s)"},
		{"job_key VARCHAR, tenant VARCHAR, custom_id VARCHAR, provider VARCHAR, model_version VARCHAR, raw_sha256 VARCHAR, line_no BIGINT, " +
			"channel VARCHAR, out_no INTEGER, category VARCHAR, price_model VARCHAR, unpriced BOOLEAN, cost_usd DECIMAL(38,18), pos BIGINT, " +
			"record_id VARCHAR, attempt INTEGER",
			"SELECT count(*) FILTER (WHERE prev >= key OR (pos IS NULL) <> (record_id = '') OR (pos IS NULL) <> (attempt = 0)) " +
				"FROM (SELECT pos, record_id, attempt, key, lag(key) OVER (ORDER BY file_row_number) AS prev " +
				"FROM (SELECT *, (pos IS NULL, coalesce(pos, 0), out_no, line_no) AS key FROM %s))"},
	} {
		var got string
		var bad int64
		q := "SELECT string_agg(column_name || ' ' || column_type, ', ') FROM (DESCRIBE SELECT * FROM read_parquet(" + quote(paths[i]) + "))"
		if err := e.DB.QueryRowContext(ctx, q).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != f.columns {
			t.Errorf("partition %s file %d columns:\n%s\nwant\n%s", r.Partition, i, got, f.columns)
		}
		src := "read_parquet(" + quote(paths[i]) + ", file_row_number = true)"
		if err := e.DB.QueryRowContext(ctx, fmt.Sprintf(f.disorder, src)).Scan(&bad); err != nil {
			t.Fatal(err)
		}
		if bad != 0 {
			t.Errorf("partition %s file %d: %d rows out of order or without their record", r.Partition, i, bad)
		}
	}
}

// TestMergeRefuses: a merge with a partition missing, or with partitions of
// other settings, is a usage error (exit 2) that names them, and writes no
// report.
func TestMergeRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 3))
	g := generate(rng, 60, 2, 1)
	l, dir := testLake(t)
	m := planAndIngest(t, l, dir, g, 25)
	o := Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}}
	for _, k := range []int{0, 2} {
		if _, err := RunPartition(ctx, l, o, lake.Partition{K: k, N: 3}); err != nil {
			t.Fatal(err)
		}
	}
	other := o
	other.MaxAttempts = 5
	if _, err := RunPartition(ctx, l, other, lake.Partition{K: 1, N: 3}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		n    int
		want []string
	}{
		{"missing", 3, []string{"partition 1/3", "--partition K/3", "max_attempts \"5\" (this merge: \"3\")"}},
		{"auto", 0, []string{"partition 1/3"}},
		{"other n", 4, []string{"0/4, 1/4, 2/4, 3/4", "2 of 3 results for --partitions 3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Merge(ctx, l, o, c.n)
			if err == nil || !errors.Is(err, errkind.ErrBadInput) {
				t.Fatalf("merge: %v, want a usage error", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// A merge with other settings than every partition's finds none of its run.
	other.MaxAttempts = 4
	if _, err := Merge(ctx, l, other, 0); !errors.Is(err, errkind.ErrBadInput) ||
		!strings.Contains(err.Error(), "no partition results of this run") || !strings.Contains(err.Error(), `max_attempts "3" (this merge: "4")`) {
		t.Errorf("merge with other settings: %v", err)
	}
	if keys, _ := l.List(ctx, lake.ReportPrefix(mustJob(t, m))); len(keys) != 0 {
		t.Errorf("a refused merge wrote %v", keys)
	}
	if _, err := RunPartition(ctx, l, o, lake.Partition{K: 3, N: 3}); !errors.Is(err, errkind.ErrBadInput) {
		t.Errorf("partition 3/3: %v, want a usage error", err)
	}
	// With the missing partition run, the merge goes through.
	if _, err := RunPartition(ctx, l, o, lake.Partition{K: 1, N: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := Merge(ctx, l, o, 0); err != nil {
		t.Fatal(err)
	}
}

// TestMergeCoverage: a merge whose partition results hold a record twice,
// or a line twice, fails with ErrIdentity before it writes a report. The
// results are forged: partition 1's marker replaced by one naming partition
// 0's outcomes file, then partition 0's costs file.
func TestMergeCoverage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := generate(rand.New(rand.NewPCG(5, 5)), 80, 2, 1)
	l, dir := testLake(t)
	m := planAndIngest(t, l, dir, g, 30)
	o := Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}}
	res := make([]*PartitionResult, 2)
	for k := range res {
		r, err := RunPartition(ctx, l, o, lake.Partition{K: k, N: 2})
		if err != nil {
			t.Fatal(err)
		}
		res[k] = r
	}
	if res[0].Expected == 0 || res[1].Expected == 0 {
		t.Fatalf("a partition holds no records: %d and %d", res[0].Expected, res[1].Expected)
	}
	e, paths := stagedFiles(t, l, res[0].CostsFile)
	var lines0 int64
	if err := e.DB.QueryRowContext(ctx, "SELECT count(*) FROM read_parquet("+quote(paths[0])+")").Scan(&lines0); err != nil {
		t.Fatal(err)
	}
	if lines0 == 0 {
		t.Fatal("partition 0 holds no lines")
	}
	for _, c := range []struct {
		name               string
		outcomes, costs    string
		wantOutcomes, want string
	}{
		{"record twice", res[0].OutcomesFile, res[1].CostsFile, fmt.Sprintf("hold %d outcomes, of %d of the job's records", 2*res[0].Expected, res[0].Expected), ""},
		{"line twice", res[1].OutcomesFile, res[0].CostsFile, fmt.Sprintf("hold %d outcomes, of %d of the job's records", res[0].Expected+res[1].Expected, res[0].Expected+res[1].Expected),
			fmt.Sprintf("%d cost lines (%d distinct)", 2*lines0, lines0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			forged := *res[1]
			forged.OutcomesFile, forged.CostsFile = c.outcomes, c.costs
			if err := os.Remove(l.LocalPath(forged.Key)); err != nil {
				t.Fatal(err)
			}
			if _, err := l.PutJSON(ctx, forged.Key, lake.FormatPartition, &forged); err != nil {
				t.Fatal(err)
			}
			_, err := Merge(ctx, l, o, 2)
			if !errors.Is(err, ErrIdentity) || !strings.Contains(err.Error(), c.wantOutcomes) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("merge: %v, want ErrIdentity saying %q and %q", err, c.wantOutcomes, c.want)
			}
			if keys, _ := l.List(ctx, lake.ReportPrefix(mustJob(t, m))); len(keys) != 0 {
				t.Errorf("a refused merge wrote %v", keys)
			}
		})
	}
}

func mustJob(t *testing.T, m *lake.Manifest) lake.Digest {
	d, err := lake.ParseDigest(m.JobKey)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPartitionsMostlyEmpty: with more partitions than records most
// partitions hold nothing (an empty outcomes file, perhaps one unknown id);
// the merge still equals the single run.
func TestPartitionsMostlyEmpty(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := generate(rand.New(rand.NewPCG(5, 5)), 3, 1, 0)
	dir := t.TempDir()
	var reports []*Report
	for _, n := range []int{0, 9} {
		l, err := lake.Open(ctx, filepath.Join(dir, fmt.Sprint("lake", n)))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		m := planAndIngest(t, l, dir, g, 2)
		o := Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}}
		if n == 0 {
			rep, err := Run(ctx, l, o)
			if err != nil {
				t.Fatal(err)
			}
			reports = append(reports, rep)
			continue
		}
		empty := 0
		for k := range n {
			r, err := RunPartition(ctx, l, o, lake.Partition{K: k, N: n})
			if err != nil {
				t.Fatal(err)
			}
			if r.Expected == 0 {
				empty++
			}
		}
		if empty < n-3 {
			t.Errorf("%d of %d partitions empty, want at least %d", empty, n, n-3)
		}
		rep, err := Merge(ctx, l, o, n)
		if err != nil {
			t.Fatal(err)
		}
		reports = append(reports, rep)
	}
	if a, b := normalised(t, reports[1]), normalised(t, reports[0]); a != b {
		t.Errorf("merged %s\nsingle %s", a, b)
	}
}

// TestPartitionRerunAfterLostMarker: a partition that died after writing its
// files but before its marker (simulated by removing the marker) writes the
// same files again — the same bytes, so nothing new — whatever the thread
// count, and commits the same result.
func TestPartitionRerunAfterLostMarker(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	m := planAndIngest(t, l, dir, generate(rand.New(rand.NewPCG(9, 9)), 400, 2, 1), 150)
	o := Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 2}}
	p := lake.Partition{K: 1, N: 2}
	first, err := RunPartition(ctx, l, o, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(l.LocalPath(first.Key)); err != nil {
		t.Fatal(err)
	}
	before, _ := l.List(ctx, "objects/")
	o.Engine.Threads = 1
	again, err := RunPartition(ctx, l, o, p)
	if err != nil {
		t.Fatal(err)
	}
	if again.Unchanged || again.OutcomesFile != first.OutcomesFile || again.CostsFile != first.CostsFile || again.Key != first.Key {
		t.Errorf("re-run wrote %s, %s; first %s, %s", again.OutcomesFile, again.CostsFile, first.OutcomesFile, first.CostsFile)
	}
	if after, _ := l.List(ctx, "objects/"); len(after) != len(before) {
		t.Errorf("re-run added %d objects", len(after)-len(before))
	}
}

// TestPartitionResultJSON: a partition result reads and writes the fields
// docs/lake.md lists, in this order, every one kept (a stored marker and
// reconcile --partition's output are read by other batchlake versions).
func TestPartitionResultJSON(t *testing.T) {
	const stored = `{
  "partition_version": 1,
  "job_key": "jk",
  "partition": "1/3",
  "k": 1,
  "n": 3,
  "report": "reports/jk/run.json",
  "key": "partitions/jk/run/1-of-3.json",
  "max_attempts": 3,
  "retry_rules": "rules-sha",
  "quality_gate": "gate-sha",
  "accept_truncated": true,
  "prices_sha256": "prices-sha",
  "output_schema_sha256": "schema-sha",
  "files": {
    "input_shards": [
      "s0"
    ],
    "output": [
      "o0"
    ],
    "error": [
      "e0"
    ],
    "retracted": [
      "r0"
    ]
  },
  "expected": 10,
  "succeeded": 4,
  "failed_retryable": 1,
  "failed_permanent": 1,
  "quality_failed": 1,
  "missing": 3,
  "unknown": 2,
  "duplicate": 5,
  "quarantined": 6,
  "retry_records": 4,
  "manual_records": 1,
  "unpriced_lines": 7,
  "truncated": 8,
  "schema_failed_lines": 9,
  "cost_usd": {
    "first_success": 0.5,
    "manual": 0.25
  },
  "outcomes_file": "objects/sha256/aa",
  "costs_file": "objects/sha256/bb",
  "reconciled_at": "2026-01-02T03:04:05Z",
  "unchanged": true
}`
	var r PartitionResult
	if err := json.Unmarshal([]byte(stored), &r); err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(&r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != stored {
		t.Errorf("partition result JSON changed:\n%s\nwant\n%s", got, stored)
	}
	// The report's fields a partition does not hold stay out of it.
	r.State, r.Closed, r.Tenant = lake.Completed, true, "t"
	if got, _ := json.Marshal(&r); bytes.Contains(got, []byte(`"state"`)) || bytes.Contains(got, []byte(`"tenant"`)) || bytes.Contains(got, []byte(`"closed"`)) {
		t.Errorf("a partition result writes report-only fields: %s", got)
	}
}

// TestPartitionReadsItsShare: each partition of a job whose tables are split
// stages (hashes, and gives DuckDB) only the split files of its own buckets —
// with 8 partitions of 16 buckets, 2 of 16 of the expected and attempts
// files, and no file another partition reads — while a job planned unsplit
// (an older lake's layout) is read whole by every partition, and result
// files whose attempts are split by their size (in two, or in one) are read
// by the partitions whose ids each holds (four, or all). The merge
// still equals the single run (TestPartitionMergeEqualsSingleRun).
func TestPartitionReadsItsShare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := generate(rand.New(rand.NewPCG(11, 3)), 3000, 20, 2)
	const n = 8
	var mu sync.Mutex
	var staged map[string]int64
	eo := EngineOptions{Threads: 1, OnStage: func(key string, size int64) {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(key, lake.TablePrefix("expected")) || strings.HasPrefix(key, lake.TablePrefix("attempts")) {
			staged[key] = size
		}
	}}
	var outputBytes int64
	for _, line := range g.output {
		outputBytes += int64(len(line)) + 1
	}
	for _, c := range []struct {
		name          string
		splitMin      int64
		splitMinBytes int64
	}{
		{"split", 1, -1},
		{"unsplit", -1, -1},
		// The output's attempts in two files, the errors' (under half
		// the output's size) in one.
		{"split by size", 1, outputBytes / 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, dir := testLake(t)
			m := planAndIngestSized(t, l, dir, g, 1000, c.splitMin, c.splitMinBytes)
			job, _ := lake.ParseDigest(m.JobKey)
			recs, err := l.IngestRecords(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			files := append([]string(nil), m.ExpectedFiles...)
			readers := map[string]int{} // how many partitions read each file
			for _, f := range m.ExpectedFiles {
				readers[f] = max(1, n/max(1, m.ExpectedSplit))
			}
			splits := map[int]int{} // attempts files by split
			for _, r := range recs {
				for _, f := range r.AttemptTables() {
					files = append(files, f.Key)
					readers[f.Key] = max(1, n/max(1, f.Split))
					splits[f.Split]++
				}
			}
			if c.splitMinBytes > 0 && (splits[2] != 2 || splits[0] != 1 || len(splits) != 2) {
				t.Fatalf("attempts files by split: %v, want two of 2 (the output's) and one of any rows (the errors')", splits)
			}
			var total int64
			for _, f := range files {
				st, err := os.Stat(l.LocalPath(f))
				if err != nil {
					t.Fatal(err)
				}
				total += st.Size()
			}
			readBy := map[string]int{}
			for k := range n {
				staged = map[string]int64{}
				r, err := RunPartition(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: eo}, lake.Partition{K: k, N: n})
				if err != nil {
					t.Fatal(err)
				}
				if r.Expected == 0 {
					t.Fatalf("partition %d/%d holds no record", k, n)
				}
				var bytes int64
				for key, size := range staged {
					bytes += size
					readBy[key]++
				}
				switch {
				case c.splitMin > 0 && c.splitMinBytes < 0 && bytes*4 > total:
					t.Errorf("partition %d/%d read %d of the %d bytes of the job's expected and attempts files, want at most a quarter", k, n, bytes, total)
				case c.splitMin < 0 && bytes != total:
					t.Errorf("partition %d/%d of an unsplit job read %d of %d bytes, want all", k, n, bytes, total)
				}
			}
			for _, f := range files {
				if readBy[f] != readers[f] {
					t.Errorf("%s read by %d partitions, want %d", f, readBy[f], readers[f])
				}
			}
			if c.splitMin > 0 && len(m.ExpectedFiles) != lake.SplitBuckets {
				t.Errorf("split job has %d expected files, want %d", len(m.ExpectedFiles), lake.SplitBuckets)
			}
			got, err := Merge(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}}, n)
			if err != nil {
				t.Fatal(err)
			}
			if got.Expected != int64(len(g.input)) {
				t.Errorf("merged report expects %d records, the input has %d", got.Expected, len(g.input))
			}
		})
	}
}

// TestPartitionOldVersion: a partition result stored by an older batchlake
// (partition_version 1, which split by record_id) is neither returned as
// this run's partition nor merged with new ones: both are usage errors that
// say why and what to do, and nothing is written.
func TestPartitionOldVersion(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	m := planAndIngest(t, l, dir, generate(rand.New(rand.NewPCG(4, 4)), 80, 2, 1), 40)
	o := Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}}
	first, err := RunPartition(ctx, l, o, lake.Partition{K: 0, N: 2})
	if err != nil {
		t.Fatal(err)
	}
	job, run, _, ok := lake.ParsePartitionKey(first.Key)
	if !ok {
		t.Fatalf("partition key %s does not parse", first.Key)
	}
	old := *first
	old.Version, old.Partition, old.K = 1, "1/2", 1
	old.Key = lake.PartitionKey(job, run, lake.Partition{K: 1, N: 2})
	if _, err := l.PutJSON(ctx, old.Key, lake.FormatPartition, old); err != nil {
		t.Fatal(err)
	}
	before, _ := l.List(ctx, "")
	for name, f := range map[string]func() error{
		"partition": func() error { _, err := RunPartition(ctx, l, o, lake.Partition{K: 1, N: 2}); return err },
		"merge":     func() error { _, err := Merge(ctx, l, o, 2); return err },
	} {
		err := f()
		if !errors.Is(err, errkind.ErrBadInput) || !strings.Contains(err.Error(), "partition version 1") || !strings.Contains(err.Error(), "another number of partitions") {
			t.Errorf("%s over a version 1 result: %v, want a usage error that explains it", name, err)
		}
	}
	if after, _ := l.List(ctx, ""); len(after) != len(before) {
		t.Errorf("refused runs wrote %d keys", len(after)-len(before))
	}
	if vr, err := lake.Verify(ctx, l); err != nil || !vr.OK() {
		t.Errorf("verify with a version 1 partition result: %v %v", err, vr.Problems)
	}
}
