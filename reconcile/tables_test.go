package reconcile

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/batchlake/batchlake/internal/testrun"
	"github.com/batchlake/batchlake/lake"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// TestOutcomesCopyExpectedColumns: a job's outcomes table takes the record
// columns it repeats from the expected files, chunk for chunk and byte for
// byte, one row group per expected row group, and reads back as the
// expected rows in their order: the rows of the outcomes written with every
// column encoded (as from expected files the copy refuses).
func TestOutcomesCopyExpectedColumns(t *testing.T) {
	t.Parallel()
	for _, splitMin := range []int64{-1, 1} {
		t.Run(fmt.Sprintf("split%d", splitMin), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			l, dir := testLake(t)
			batch := generate(rand.New(rand.NewPCG(9, 9)), 300, 2, 1)
			m := planAndIngestSplit(t, l, dir, batch, 40, splitMin)
			rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 2}})
			if err != nil {
				t.Fatal(err)
			}
			root, ok := l.LocalDir()
			if !ok {
				t.Fatal("not a local lake")
			}
			out, outPF := testrun.OpenParquet(t, filepath.Join(root, rep.OutcomesFile))
			outMD := outPF.Metadata()
			var want []lake.ExpectedRow
			g := 0 // the outcomes' row group
			for _, tf := range m.ExpectedTables() {
				path := filepath.Join(root, tf.Key)
				src, srcPF := testrun.OpenParquet(t, path)
				srcMD := srcPF.Metadata()
				for _, rg := range srcMD.RowGroups {
					if g == len(outMD.RowGroups) {
						t.Fatalf("the outcomes have %d row groups, the expected files more", g)
					}
					if n := outMD.RowGroups[g].NumRows; n != rg.NumRows {
						t.Fatalf("outcomes row group %d has %d rows, its expected row group %d", g, n, rg.NumRows)
					}
					for _, name := range copiedOutcomeColumns {
						got, wantChunk := chunkBytes(t, out, outMD.RowGroups[g], name), chunkBytes(t, src, rg, name)
						if !bytes.Equal(got, wantChunk) {
							t.Errorf("outcomes row group %d: column %s is not the chunk of %s", g, name, tf.Key)
						}
					}
					g++
				}
				rows, err := parquet.ReadFile[lake.ExpectedRow](path)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, rows...)
			}
			if g != len(outMD.RowGroups) {
				t.Fatalf("the outcomes have %d row groups, the expected files %d", len(outMD.RowGroups), g)
			}
			got, err := parquet.ReadFile[lake.OutcomeRow](filepath.Join(root, rep.OutcomesFile))
			if err != nil {
				t.Fatal(err)
			}
			// The same job in a lake of its own, reconciled encoding every
			// column.
			l2, dir2 := testLake(t)
			if m2 := planAndIngestSplit(t, l2, dir2, batch, 40, splitMin); m2.JobKey != m.JobKey {
				t.Fatalf("job %s planned again as %s", m.JobKey, m2.JobKey)
			}
			rep2, err := Run(ctx, l2, Options{JobKey: m.JobKey, TmpDir: dir2, Engine: EngineOptions{Threads: 2}, encodeAll: true})
			if err != nil {
				t.Fatal(err)
			}
			root2, _ := l2.LocalDir()
			encoded, err := parquet.ReadFile[lake.OutcomeRow](filepath.Join(root2, rep2.OutcomesFile))
			if err != nil {
				t.Fatal(err)
			}
			if len(encoded) != len(got) {
				t.Fatalf("%d outcomes encoded, %d with copied columns", len(encoded), len(got))
			}
			for i := range got {
				if got[i] != encoded[i] {
					t.Fatalf("outcome %d: %+v with copied columns, %+v encoded", i, got[i], encoded[i])
				}
			}
			if rep.CostsFile != rep2.CostsFile || rep.counts() != rep2.counts() {
				t.Errorf("costs %s and counts %s with copied columns; encoded %s and %s", rep.CostsFile, rep.counts(), rep2.CostsFile, rep2.counts())
			}
			if len(got) != len(want) || int64(len(got)) != m.ExpectedRecords {
				t.Fatalf("%d outcomes, %d expected rows, %d records", len(got), len(want), m.ExpectedRecords)
			}
			for i, o := range got {
				e := want[i]
				if o.JobKey != m.JobKey || o.Tenant != m.Tenant || o.RecordID != e.RecordID || o.BusinessKey != e.BusinessKey ||
					o.ShardID != e.ShardID || o.CustomID != e.CustomID || o.Attempt != e.Attempt || o.ParentJobKey != e.ParentJobKey || o.Outcome == "" {
					t.Fatalf("outcome %d %+v of expected row %+v", i, o, e)
				}
			}
		})
	}
}

// chunkBytes is the bytes of the column chunk of column name in rg.
func chunkBytes(t *testing.T, f *os.File, rg format.RowGroup, name string) []byte {
	t.Helper()
	for _, c := range rg.Columns {
		if len(c.MetaData.PathInSchema) != 1 || c.MetaData.PathInSchema[0] != name {
			continue
		}
		start := c.MetaData.DataPageOffset
		if d := c.MetaData.DictionaryPageOffset; d > 0 {
			start = min(start, d)
		}
		b := make([]byte, c.MetaData.TotalCompressedSize)
		if _, err := f.ReadAt(b, start); err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Fatalf("no column %s in %s", name, f.Name())
	return nil
}
