package lake

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// TestFillLater: a table written with its job_key column empty and filled in
// at the commit reads back as the same rows as one written with the job key
// in every row, and describes the column as that table does: the same
// encodings, codec, sizes, statistics and page index, in every row group
// (whole ones and the last, short one), split or not. Every other column is
// described as in the table written whole.
func TestFillLater(t *testing.T) {
	ctx := context.Background()
	l := openMem(t)
	job := Sum([]byte("fill job"))
	var rows []ExpectedRow
	for i := range 40000 {
		id := fmt.Sprintf("rec-%06d", i)
		rows = append(rows, ExpectedRow{JobKey: job.Hex(), Tenant: "t", ShardID: "part-00000", ShardLine: int64(i + 1),
			RecordID: Sum([]byte(id)).Hex(), BusinessKey: id, CustomID: id, Attempt: 1, InputLine: int64(i + 1)})
	}
	read := func(key string) ([]byte, []ExpectedRow) {
		t.Helper()
		d, ok := ParseObjectKey(key)
		if !ok {
			t.Fatalf("key %s is not content-addressed", key)
		}
		b, err := l.GetVerified(ctx, key, d)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parquet.Read[ExpectedRow](bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		return b, got
	}
	for _, c := range []struct {
		name   string
		split  int
		group  int64
		groups int // row groups a file has at least
	}{{"one file", 0, 15000, 3}, {"split", SplitBuckets, 0, 1}} {
		t.Run(c.name, func(t *testing.T) {
			write := func(fill bool) []string {
				var w *TableWriter[ExpectedRow]
				var err error
				if c.split > 0 {
					w = NewSplitTableWriter(l, t.TempDir(), "expected", "t", job, c.split, func(r *ExpectedRow) string { return r.CustomID })
				} else if w, err = newTableWriter[ExpectedRow](l, t.TempDir(), "expected", "t", job, c.group, ""); err != nil {
					t.Fatal(err)
				}
				if fill {
					if err := w.FillLater("job_key"); err != nil {
						t.Fatal(err)
					}
				}
				for i := 0; i < len(rows); i += 1000 {
					batch := append([]ExpectedRow(nil), rows[i:i+1000]...)
					if fill {
						for j := range batch {
							batch[j].JobKey = ""
						}
					}
					if err := w.Write(batch...); err != nil {
						t.Fatal(err)
					}
				}
				if fill {
					w.Fill(job, job.Hex())
				}
				if c.split > 0 {
					keys, _, err := w.CommitSplit(ctx)
					if err != nil {
						t.Fatal(err)
					}
					return keys
				}
				key, err := w.Commit(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return []string{key}
			}
			whole, filled := write(false), write(true)
			if len(whole) != len(filled) {
				t.Fatalf("%d files filled, %d written whole", len(filled), len(whole))
			}
			var n int
			for i := range whole {
				wb, wrows := read(whole[i])
				fb, frows := read(filled[i])
				if !reflect.DeepEqual(frows, wrows) {
					t.Fatalf("file %d: the filled rows differ from the rows written whole", i)
				}
				n += len(frows)
				wf, err := parquet.OpenFile(bytes.NewReader(wb), int64(len(wb)))
				if err != nil {
					t.Fatal(err)
				}
				ff, err := parquet.OpenFile(bytes.NewReader(fb), int64(len(fb)))
				if err != nil {
					t.Fatal(err)
				}
				wm, fm := wf.Metadata(), ff.Metadata()
				if len(wm.RowGroups) != len(fm.RowGroups) || len(wm.RowGroups) < c.groups {
					t.Fatalf("file %d: %d row groups filled, %d written whole (want at least %d)", i, len(fm.RowGroups), len(wm.RowGroups), c.groups)
				}
				if !reflect.DeepEqual(fm.Schema, wm.Schema) || fm.NumRows != wm.NumRows || fm.CreatedBy != wm.CreatedBy {
					t.Errorf("file %d: schema, rows or created_by differ", i)
				}
				// parquet-java gives a row group to the split that holds
				// the middle of it, taken from where its first column
				// starts: each middle must lie in the file, after the one
				// before.
				last := int64(0)
				for g, rg := range fm.RowGroups {
					c := rg.Columns[0].MetaData
					start, total := c.DataPageOffset, int64(0)
					if c.DictionaryPageOffset > 0 {
						start = min(start, c.DictionaryPageOffset)
					}
					for _, col := range rg.Columns {
						total += col.MetaData.TotalCompressedSize
					}
					if mid := start + total/2; mid <= last || mid >= int64(len(fb)) {
						t.Errorf("file %d row group %d: middle at byte %d, after %d, in a file of %d", i, g, mid, last, len(fb))
					} else {
						last = mid
					}
				}
				cols := len(wm.RowGroups[0].Columns)
				for g := range wm.RowGroups {
					wg, fg := wm.RowGroups[g], fm.RowGroups[g]
					if wg.NumRows != fg.NumRows || wg.TotalByteSize != fg.TotalByteSize || wg.TotalCompressedSize != fg.TotalCompressedSize {
						t.Errorf("file %d row group %d: rows %d, %d bytes (%d compressed), want %d, %d (%d)", i, g,
							fg.NumRows, fg.TotalByteSize, fg.TotalCompressedSize, wg.NumRows, wg.TotalByteSize, wg.TotalCompressedSize)
					}
					for col := range cols {
						wc, fc := described(wg.Columns[col]), described(fg.Columns[col])
						if !reflect.DeepEqual(wc, fc) {
							t.Errorf("file %d row group %d column %v:\nfilled %+v\nwhole  %+v", i, g, wc.PathInSchema, fc, wc)
						}
						k := g*cols + col
						if !reflect.DeepEqual(ff.ColumnIndexes()[k], wf.ColumnIndexes()[k]) {
							t.Errorf("file %d row group %d column %v: column index %+v, want %+v", i, g, wc.PathInSchema, ff.ColumnIndexes()[k], wf.ColumnIndexes()[k])
						}
						if a, b := pages(ff.OffsetIndexes()[k]), pages(wf.OffsetIndexes()[k]); !reflect.DeepEqual(a, b) {
							t.Errorf("file %d row group %d column %v: pages %v, want %v", i, g, wc.PathInSchema, a, b)
						}
					}
				}
			}
			if n != len(rows) {
				t.Fatalf("%d rows read, %d written", n, len(rows))
			}
		})
	}
}

// described is a column chunk's metadata without the offsets, which differ
// where a chunk was written.
func described(c format.ColumnChunk) format.ColumnMetaData {
	m := c.MetaData
	m.DataPageOffset, m.DictionaryPageOffset, m.IndexPageOffset = 0, 0, 0
	return m
}

// pages are an offset index's page sizes and first rows, without their
// offsets.
func pages(o format.OffsetIndex) [][2]int64 {
	var out [][2]int64
	for _, p := range o.PageLocations {
		out = append(out, [2]int64{int64(p.CompressedPageSize), p.FirstRowIndex})
	}
	return out
}

// A commit of a column left to fill and never given its value fails: the
// rows would be stored with it empty. So does a fill of a value into a
// column that held one, or into a table's first column (readers find where
// a row group starts by it).
func TestFillLaterUnfilled(t *testing.T) {
	l := openMem(t)
	job := Sum([]byte("j"))
	for _, c := range []struct {
		name   string
		column string
		row    ExpectedRow
		value  string // "": never given
		want   string // in the error
	}{
		{"never filled", "job_key", ExpectedRow{Tenant: "t", CustomID: "a"}, "", "before the value"},
		{"a value there", "job_key", ExpectedRow{JobKey: "already", Tenant: "t", CustomID: "a"}, job.Hex(), "holds values"},
		{"the first column", "tenant", ExpectedRow{CustomID: "a"}, "t", "first column"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := NewTableWriter[ExpectedRow](l, t.TempDir(), "expected", "t", job)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.FillLater(c.column); err != nil {
				t.Fatal(err)
			}
			if err := w.Write(c.row); err != nil {
				t.Fatal(err)
			}
			if c.value != "" {
				w.Fill(job, c.value)
			}
			if _, err := w.Commit(context.Background()); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("commit: %v, want an error saying %q", err, c.want)
			}
		})
	}
}
