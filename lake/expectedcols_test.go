package lake

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/internal/testrun"
	"github.com/parquet-go/parquet-go"
)

// writeExpected stores rows as an expected table file the way plan does
// (groupRows rows a row group) and returns the path of a local copy.
func writeExpected(t *testing.T, rows []ExpectedRow, groupRows int64) string {
	t.Helper()
	ctx := context.Background()
	l := openMem(t)
	job := Sum([]byte("cursor job"))
	w, err := newTableWriter[ExpectedRow](l, t.TempDir(), "expected", "t", job, groupRows, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rows...); err != nil {
		t.Fatal(err)
	}
	key, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := ParseObjectKey(key)
	b, err := l.GetVerified(ctx, key, d)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "expected.parquet")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func cursorRows(n int) []ExpectedRow {
	rows := make([]ExpectedRow, n)
	for i := range rows {
		rows[i] = ExpectedRow{JobKey: "job", Tenant: "t", ShardID: fmt.Sprintf("shard-%d", i/3000),
			RecordID: Sum([]byte(fmt.Sprint(i))).Hex(), BusinessKey: fmt.Sprintf("key-%07d", i), CustomID: fmt.Sprintf("c%d", i*7),
			Attempt: int32(1 + i%3), ParentJobKey: []string{"", "parent-a", "parent-b"}[i%3], ShardLine: int64(i)}
	}
	return rows
}

// TestExpectedCursor: the cursor hands out every row of the file in order,
// column for column as written, whatever the size of the reads and however
// the rows fall into row groups and pages (record_id's 64 characters fill
// several pages a row group, checked below; shard_id and parent_job_key are
// dictionary columns), and refuses to read past the file's last row.
func TestExpectedCursor(t *testing.T) {
	rows := cursorRows(20000)
	for _, tc := range []struct {
		name      string
		groupRows int64
		reads     []int
		paged     bool // record_id takes two pages or more in every row group
	}{
		{"one row group, one read", rowGroupRows, []int{20000}, true},
		{"row groups of 7000, reads of 4096", 7000, []int{4096}, true},
		{"row groups of 1000, reads across them", 1000, []int{1, 999, 1001, 3, 4093}, false},
		{"row groups of 6999, single rows then the rest", 6999, []int{1, 1, 1, 19997}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeExpected(t, rows, tc.groupRows)
			if pages, groups := recordIDPages(t, path); tc.paged && pages < 2*groups {
				t.Fatalf("record_id fills %d pages in %d row groups: the case does not cross pages within its row groups", pages, groups)
			}
			c, err := OpenExpectedCursor(path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.Rows() != int64(len(rows)) {
				t.Fatalf("Rows() = %d, want %d", c.Rows(), len(rows))
			}
			var cols ExpectedCols
			at := 0
			for i := 0; at < len(rows); i++ {
				n := min(tc.reads[i%len(tc.reads)], len(rows)-at)
				if err := c.Next(n, &cols); err != nil {
					t.Fatalf("read %d rows from row %d: %v", n, at, err)
				}
				if cols.Len() != n {
					t.Fatalf("read %d rows from row %d: got %d", n, at, cols.Len())
				}
				for j := range n {
					w := rows[at+j]
					got := ExpectedRow{JobKey: w.JobKey, Tenant: w.Tenant, ShardLine: w.ShardLine, RecordID: cols.RecordID[j],
						BusinessKey: cols.BusinessKey[j], ShardID: cols.ShardID[j], CustomID: cols.CustomID[j],
						Attempt: cols.Attempt[j], ParentJobKey: cols.ParentJobKey[j]}
					if got != w {
						t.Fatalf("row %d: got %+v, want %+v", at+j, got, w)
					}
				}
				at += n
			}
			if err := c.Next(1, &cols); err == nil || !strings.Contains(err.Error(), "wanted") {
				t.Fatalf("a read past the last row: %v, want an error", err)
			}
		})
	}
}

// TestExpectedCursorRefuses: a file without one of the columns, or with one
// of another type, is refused by name when opened.
func TestExpectedCursorRefuses(t *testing.T) {
	type noAttempt struct {
		RecordID     string `parquet:"record_id"`
		BusinessKey  string `parquet:"business_key"`
		ShardID      string `parquet:"shard_id"`
		CustomID     string `parquet:"custom_id"`
		ParentJobKey string `parquet:"parent_job_key"`
	}
	type textAttempt struct {
		noAttempt
		Attempt string `parquet:"attempt"`
	}
	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"no attempt column", parquetOf(t, []noAttempt{{RecordID: "r"}}), "no column attempt"},
		{"attempt as text", parquetOf(t, []textAttempt{{Attempt: "1"}}), "column attempt is BYTE_ARRAY, not INT32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.parquet")
			if err := os.WriteFile(path, tc.file, 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := OpenExpectedCursor(path)
			if err == nil {
				c.Close()
				t.Fatalf("opened; want an error with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q, want %q and the file's name", err, tc.want)
			}
		})
	}
}

func parquetOf[T any](t *testing.T, rows []T) []byte {
	t.Helper()
	var b bytes.Buffer
	w := parquet.NewGenericWriter[T](&b)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// recordIDPages counts the data pages of the record_id column in the file,
// and its row groups.
func recordIDPages(t *testing.T, path string) (pages, groups int) {
	t.Helper()
	_, pf := testrun.OpenParquet(t, path)
	leaf, _ := pf.Schema().Lookup("record_id")
	for _, rg := range pf.RowGroups() {
		pp := rg.ColumnChunks()[leaf.ColumnIndex].Pages()
		for {
			if _, err := pp.ReadPage(); err != nil {
				break
			}
			pages++
		}
		pp.Close()
	}
	return pages, len(pf.RowGroups())
}

// TestScanCustomIDs: every custom_id of the file, in row order, across row
// groups and pages, as the lake writes them (plain pages) and as a
// dictionary-encoded column.
func TestScanCustomIDs(t *testing.T) {
	rows := cursorRows(20000)
	type dictRow struct {
		CustomID string `parquet:"custom_id,dict"`
	}
	dictPath := filepath.Join(t.TempDir(), "dict.parquet")
	drows := make([]dictRow, len(rows))
	for i := range drows {
		drows[i].CustomID = fmt.Sprintf("c%d", i%7)
	}
	if err := parquet.WriteFile(dictPath, drows, parquet.MaxRowsPerRowGroup(6000), parquet.PageBufferSize(1024)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		path string
		want func(i int) string
	}{
		{"an expected table file", writeExpected(t, rows, 6000), func(i int) string { return rows[i].CustomID }},
		{"dictionary pages", dictPath, func(i int) string { return drows[i].CustomID }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			if err := ScanCustomIDs(c.path, func(id []byte) { got = append(got, string(id)) }); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(rows) {
				t.Fatalf("%d ids, want %d", len(got), len(rows))
			}
			for i := range got {
				if got[i] != c.want(i) {
					t.Fatalf("id %d: %q, want %q", i, got[i], c.want(i))
				}
			}
		})
	}
}
