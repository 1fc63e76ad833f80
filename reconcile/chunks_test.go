package reconcile

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// TestRecordRanges: the ranges are open at both ends, adjacent and
// increasing, so they partition every string in record_id order.
func TestRecordRanges(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want int
	}{{0, 1}, {1, 1}, {chunkRows, 1}, {chunkRows + 1, 2}, {16 * chunkRows, 16}, {1 << 40, 4096}} {
		rs := recordRanges(tc.n)
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
// small ranges are byte for byte the files of one range each.
func TestChunkedTablesEqualWhole(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 11))
	g := generate(rng, 300, 3, 1)
	dir := t.TempDir()
	run := func(name string, rows int64) (*Report, map[string][]byte) {
		t.Helper()
		old := chunkRows
		chunkRows = rows
		defer func() { chunkRows = old }()
		l, err := lake.Open(ctx, filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		m := planAndIngest(t, l, dir, g, 40)
		rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 2, CacheDir: filepath.Join(dir, "cache-"+name)}})
		if err != nil {
			t.Fatal(err)
		}
		return rep, objectsOf(t, l, rep)
	}
	want, wantObjs := run("whole", 1<<40)
	if want.OutcomesFile == "" || want.CostsFile == "" {
		t.Fatalf("no tables written: %+v", want)
	}
	for _, rows := range []int64{1, 7, 50} {
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
