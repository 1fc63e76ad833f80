package lake

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// copiedOutcomeColumns are the outcomes' columns these tests copy from
// expected files, as reconcile does.
var copiedOutcomeColumns = []string{"record_id", "business_key", "shard_id", "custom_id", "attempt", "parent_job_key"}

// writeSource writes rows as a table file of T at path in row groups of at
// most group rows, as a TableWriter does, with opts after its own.
func writeSource[T any](t *testing.T, path string, rows []T, group int64, opts ...parquet.WriterOption) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := parquet.NewGenericWriter[T](f, append(tableWriterOptions(group), opts...)...)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// copyFixture is expected rows in three files of several row groups each
// (the last ones short), and the outcome of each row.
func copyFixture(t *testing.T) (paths []string, outcomes []OutcomeRow) {
	dir := t.TempDir()
	job := Sum([]byte("copy job")).Hex()
	n := 0
	for f, size := range []int{700, 256, 1001} {
		var rows []ExpectedRow
		for range size {
			id := fmt.Sprintf("rec-%06d", n)
			r := ExpectedRow{JobKey: job, Tenant: "t", ShardID: fmt.Sprintf("part-%05d", n/300), ShardLine: int64(n%300 + 1),
				RecordID: Sum([]byte(id)).Hex(), BusinessKey: "key " + id, CustomID: id, Attempt: int32(1 + n%3),
				InputLine: int64(n + 1)}
			if n%5 == 0 {
				r.ParentJobKey = Sum([]byte("parent")).Hex()
			}
			rows = append(rows, r)
			cost, err := ParseMoney(fmt.Sprintf("0.%06d", n*37%1000000))
			if err != nil {
				t.Fatal(err)
			}
			outcomes = append(outcomes, OutcomeRow{JobKey: job, Tenant: "t", RecordID: r.RecordID, BusinessKey: r.BusinessKey,
				ShardID: r.ShardID, CustomID: r.CustomID, Attempt: r.Attempt, ParentJobKey: r.ParentJobKey,
				Outcome: []string{"succeeded", "failed_retryable", "missing"}[n%3], Disposition: []string{"accepted", "retry"}[n%2],
				Reason: []string{"", "rate_limit"}[n%2], Lines: int32(n % 4), CostUSD: cost, Truncated: n%11 == 0})
			n++
		}
		p := filepath.Join(dir, fmt.Sprintf("expected-%d.parquet", f))
		var opts []parquet.WriterOption
		if f == 1 {
			// Written by the first format whose columns are written as
			// today's: copied too.
			opts = append(opts, parquet.CreatedBy(createdBy, strconv.Itoa(copySince), ""))
		}
		writeSource(t, p, rows, 256, opts...)
		paths = append(paths, p)
	}
	return paths, outcomes
}

// blanked is rows with the copied columns left empty, as a caller of
// CopyColumns writes them.
func blanked(rows []OutcomeRow) []OutcomeRow {
	out := append([]OutcomeRow(nil), rows...)
	for i := range out {
		o := &out[i]
		o.RecordID, o.BusinessKey, o.ShardID, o.CustomID, o.Attempt, o.ParentJobKey = "", "", "", "", 0, ""
	}
	return out
}

// TestCopyColumns: a table that takes columns from the files whose rows it
// repeats is, byte for byte, the file its writer makes from the whole rows
// with its row groups cut where the sources' are, whatever the batches the
// rows come in; it reads back as those rows.
func TestCopyColumns(t *testing.T) {
	ctx := context.Background()
	paths, rows := copyFixture(t)
	// The reference: every value encoded, a row group per source row group.
	var want bytes.Buffer
	ref := parquet.NewGenericWriter[OutcomeRow](&want, tableWriterOptions(rowGroupRows)...)
	at := 0
	for _, size := range []int{256, 256, 188, 256, 256, 256, 256, 233} {
		if _, err := ref.Write(rows[at : at+size]); err != nil {
			t.Fatal(err)
		}
		if err := ref.Flush(); err != nil {
			t.Fatal(err)
		}
		at += size
	}
	if at != len(rows) {
		t.Fatalf("the reference has %d rows of %d", at, len(rows))
	}
	if err := ref.Close(); err != nil {
		t.Fatal(err)
	}
	for _, batch := range []int{1, 97, 256, 5000} {
		t.Run(fmt.Sprintf("batches of %d", batch), func(t *testing.T) {
			l := openMem(t)
			w, err := NewTableWriter[OutcomeRow](l, t.TempDir(), "outcomes", "t", Sum([]byte("copy job")))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			ok, err := w.CopyColumns(copiedOutcomeColumns, paths)
			if err != nil || !ok {
				t.Fatalf("CopyColumns: %v, %v", ok, err)
			}
			in := blanked(rows)
			for i := 0; i < len(in); i += batch {
				if err := w.Write(in[i:min(i+batch, len(in))]...); err != nil {
					t.Fatal(err)
				}
			}
			key, err := w.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			d, _ := ParseObjectKey(key)
			got, err := l.GetVerified(ctx, key, d)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("the assembled file (%d bytes) is not the file written whole (%d bytes)", len(got), want.Len())
			}
			back, err := parquet.Read[OutcomeRow](bytes.NewReader(got), int64(len(got)))
			if err != nil {
				t.Fatal(err)
			}
			if len(back) != len(rows) {
				t.Fatalf("%d rows read back, %d written", len(back), len(rows))
			}
			for i := range rows {
				if back[i] != rows[i] {
					t.Fatalf("row %d reads back as %+v, want %+v", i, back[i], rows[i])
				}
			}
		})
	}
}

// TestCopyColumnsRefused: columns are copied only from files their writer
// would have written the same way; otherwise CopyColumns says no and the
// table is written as usual. Rows that do not match the sources in number
// fail the commit.
func TestCopyColumnsRefused(t *testing.T) {
	ctx := context.Background()
	paths, rows := copyFixture(t)
	dir := t.TempDir()
	one := func(name string, write func(path string)) []string {
		p := filepath.Join(dir, name)
		write(p)
		return []string{paths[0], p}
	}
	expected := []ExpectedRow{{RecordID: "r", CustomID: "c", Attempt: 1}}
	type dictIDs struct { // record_id dictionary-encoded
		RecordID     string `parquet:"record_id,dict"`
		BusinessKey  string `parquet:"business_key"`
		ShardID      string `parquet:"shard_id,dict"`
		CustomID     string `parquet:"custom_id"`
		Attempt      int32  `parquet:"attempt,delta"`
		ParentJobKey string `parquet:"parent_job_key,dict"`
	}
	type plainAttempt struct { // attempt PLAIN
		RecordID     string `parquet:"record_id"`
		BusinessKey  string `parquet:"business_key"`
		ShardID      string `parquet:"shard_id,dict"`
		CustomID     string `parquet:"custom_id"`
		Attempt      int32  `parquet:"attempt"`
		ParentJobKey string `parquet:"parent_job_key,dict"`
	}
	type noParent struct {
		RecordID    string `parquet:"record_id"`
		BusinessKey string `parquet:"business_key"`
		ShardID     string `parquet:"shard_id,dict"`
		CustomID    string `parquet:"custom_id"`
		Attempt     int32  `parquet:"attempt,delta"`
	}
	for _, c := range []struct {
		name    string
		sources []string
	}{
		{"an older table format", one("v7.parquet", func(p string) {
			writeSource(t, p, expected, 256, parquet.CreatedBy(createdBy, strconv.Itoa(copySince-1), ""))
		})},
		{"another writer", one("other.parquet", func(p string) {
			writeSource(t, p, expected, 256, parquet.CreatedBy("other", createdByVer, ""))
		})},
		{"a column of another encoding", one("dict.parquet", func(p string) {
			writeSource(t, p, []dictIDs{{RecordID: "r", CustomID: "c"}}, 256)
		})},
		{"integers not delta-coded", one("plain.parquet", func(p string) {
			writeSource(t, p, []plainAttempt{{RecordID: "r", CustomID: "c"}}, 256)
		})},
		{"a column missing", one("noparent.parquet", func(p string) {
			writeSource(t, p, []noParent{{RecordID: "r", CustomID: "c"}}, 256)
		})},
		{"another codec", one("snappy.parquet", func(p string) {
			writeSource(t, p, expected, 256, parquet.Compression(&parquet.Snappy))
		})},
		{"a row group larger than the table's", one("big.parquet", func(p string) {
			writeSource(t, p, make([]ExpectedRow, rowGroupRows+1), rowGroupRows+1)
		})},
		{"no sources", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := NewTableWriter[OutcomeRow](openMem(t), t.TempDir(), "outcomes", "t", Sum([]byte("copy job")))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			if ok, err := w.CopyColumns(copiedOutcomeColumns, c.sources); ok || err != nil {
				t.Fatalf("CopyColumns: %v, %v; want false", ok, err)
			}
			if err := w.Write(rows...); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, c := range []struct {
		name string
		rows []OutcomeRow
		want string
	}{
		{"a row short", rows[:len(rows)-1], "hold more"},
		{"a row over", append(rows[:len(rows):len(rows)], rows[0]), "more rows than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := NewTableWriter[OutcomeRow](openMem(t), t.TempDir(), "outcomes", "t", Sum([]byte("copy job")))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			if ok, err := w.CopyColumns(copiedOutcomeColumns, paths); !ok || err != nil {
				t.Fatalf("CopyColumns: %v, %v", ok, err)
			}
			err = w.Write(blanked(c.rows)...)
			if err == nil {
				_, err = w.Commit(ctx)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}
