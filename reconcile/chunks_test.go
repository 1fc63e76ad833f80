package reconcile

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// TestRecordRanges: the ranges are open at both ends, adjacent and
// increasing, so they partition every string in record_id order.
func TestRecordRanges(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want int
	}{{0, 1}, {1, 1}, {defaultChunkRows, 1}, {defaultChunkRows + 1, 2}, {16 * defaultChunkRows, 16}, {1 << 40, 4096}} {
		rs := recordRanges(tc.n, defaultChunkRows)
		if len(rs) != tc.want {
			t.Errorf("n=%d: %d ranges, want %d", tc.n, len(rs), tc.want)
			continue
		}
		if rs[0].Lo != "" || rs[len(rs)-1].Hi != "" {
			t.Errorf("n=%d: outer bounds %q, %q, want open", tc.n, rs[0].Lo, rs[len(rs)-1].Hi)
		}
		for i := 1; i < len(rs); i++ {
			if rs[i].Lo != rs[i-1].Hi || rs[i].Lo <= rs[i-1].Lo {
				t.Errorf("n=%d: range %d %+v does not follow %+v", tc.n, i, rs[i], rs[i-1])
			}
		}
	}
}

// TestChunkedTablesEqualWhole: the outcomes and costs files read in many
// small ranges, from tables sorted in many small steps, are byte for byte the
// files of one range and one sort each.
func TestChunkedTablesEqualWhole(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 11))
	g := generate(rng, 120, 3, 1) // every record its own range at 1 row; a few ranges at 50
	dir := t.TempDir()
	run := func(name string, rows int64) (*Report, map[string][]byte) {
		t.Helper()
		l, _, rep := reconcileNewWith(t, dir, name, g, 40, func(o *Options) {
			o.Engine.ChunkRows, o.Engine.SortRows, o.Engine.SortInSteps = rows, rows, rows < 1<<40
		})
		return rep, objectsOf(t, l, rep)
	}
	want, wantObjs := run("whole", 1<<40)
	if want.OutcomesFile == "" || want.CostsFile == "" {
		t.Fatalf("no tables written: %+v", want)
	}
	sizes := []int64{1, 7, 50}
	if testing.Short() {
		sizes = []int64{1, 50} // -short: every record its own range, and ranges of many; the full run adds 7
	}
	for _, rows := range sizes {
		t.Run(fmt.Sprint(rows), func(t *testing.T) {
			got, objs := run(fmt.Sprintf("chunk%d", rows), rows)
			if got.OutcomesFile != want.OutcomesFile || got.CostsFile != want.CostsFile {
				t.Errorf("tables %s, %s; in one range %s, %s", got.OutcomesFile, got.CostsFile, want.OutcomesFile, want.CostsFile)
			}
			for k, b := range wantObjs {
				if !bytes.Equal(objs[k], b) {
					t.Errorf("object %s differs", k)
				}
			}
		})
	}
}

// TestTableRowsOrderChecked: outcome rows are read without ORDER BY, relying
// on the outcomes table being stored in record_id order; rows that come out
// of order (a table built some other way) fail the write loudly instead of
// producing a file in another order.
func TestTableRowsOrderChecked(t *testing.T) {
	ctx := context.Background()
	l, dir := testLake(t)
	e, err := OpenEngine(l, EngineOptions{Threads: 2, CacheDir: filepath.Join(dir, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// Three outcomes stored in descending record_id order.
	err = e.Exec(ctx, "fixture", []string{
		`CREATE TEMP TABLE outcomes AS
		 SELECT 'j' AS job_key, 't' AS tenant, id AS record_id, 'k' || id AS business_key, 's' AS shard_id, 'c' || id AS custom_id,
		        1 AS attempt, '' AS parent_job_key, 'succeeded' AS outcome, 'accepted' AS disposition, '' AS reason,
		        1 AS lines, CAST(0 AS DECIMAL(38, 18)) AS cost_usd, false AS truncated
		 FROM (VALUES ('cc'), ('bb'), ('aa')) v(id)`,
	})
	if err != nil {
		t.Fatal(err)
	}
	m := &lake.Manifest{JobKey: "j", Tenant: "t", ExpectedRecords: 3}
	_, _, err = writeTables(ctx, e, l, m, lake.Sum([]byte("j")), dir, false, nil)
	if err == nil || !strings.Contains(err.Error(), "out of record_id order") {
		t.Fatalf("writeTables over an unordered outcomes table: %v, want an order error", err)
	}
}
