package lake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/batchlake/batchlake/internal/testrun"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// Whatever its depth, a pipe writes the rows it is given, in order: its file
// is the one WriteTable makes of the same rows (same bytes, same key).
func TestTablePipeDepths(t *testing.T) {
	ctx := context.Background()
	l, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var job Digest
	rows := make([]CostRow, 3*pipeBatch+17)
	for i := range rows {
		rows[i] = CostRow{JobKey: "j", Tenant: "t", RecordID: fmt.Sprintf("r%08d", i), CustomID: fmt.Sprintf("c%d", i), Attempt: 1,
			Category: "first_success", LineNo: int64(i + 1), CostUSD: mustMoney(t, fmt.Sprintf("0.%06d", i))}
	}
	want, err := WriteTable(ctx, l, t.TempDir(), "costs", "t", job, rows)
	if err != nil {
		t.Fatal(err)
	}
	for _, depth := range []int{0, 1, 2, 16} {
		w, err := NewTableWriter[CostRow](l, t.TempDir(), "costs", "t", job)
		if err != nil {
			t.Fatal(err)
		}
		p := NewTablePipe(ctx, w, depth)
		for _, r := range rows {
			if err := p.Add(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Close(nil); err != nil {
			t.Fatalf("depth %d: close: %v", depth, err)
		}
		got, err := p.Commit()
		if err != nil {
			t.Fatalf("depth %d: commit: %v", depth, err)
		}
		if got != want {
			t.Errorf("depth %d: file %s, WriteTable of the same rows gave %s", depth, got, want)
		}
	}
}

// The caller's error stops the pipe: Close returns without writing the last,
// partial batch, and reports no error of its own.
func TestTablePipeCallerError(t *testing.T) {
	ctx := context.Background()
	l, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewTableWriter[CostRow](l, t.TempDir(), "costs", "t", Digest{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	p := NewTablePipe(ctx, w, 16)
	for i := range 2*pipeBatch + 5 {
		if err := p.Add(CostRow{RecordID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	stop := errors.New("scan failed")
	if err := p.Close(stop); err != nil {
		t.Fatalf("close after the caller's error: %v (the writer itself did not fail)", err)
	}
	if w.Rows() != 2*pipeBatch {
		t.Errorf("%d rows written, want the %d of the full batches (the last, partial one is dropped)", w.Rows(), 2*pipeBatch)
	}
}

// A deep pipe costs a small table no more memory than a shallow one: its
// batches are allocated as rows arrive, not depth of them up front (a
// reconcile of a few records used to allocate 32 MiB of empty batches).
func TestTablePipeSmallTableAllocatesLittle(t *testing.T) {
	ctx := context.Background()
	l, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	alloc := func(depth int) uint64 {
		w, err := NewTableWriter[CostRow](l, t.TempDir(), "costs", "t", Digest{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Abort()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		p := NewTablePipe(ctx, w, depth)
		for i := range 10 {
			if err := p.Add(CostRow{RecordID: fmt.Sprint(i)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Close(nil); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	alloc(1) // the first table writer's one-time costs
	shallow, deep := alloc(1), alloc(64)
	// Up front, depth 64 would cost 63 batches more than depth 1; allow 8
	// (the object writer's pooled 1 MiB buffer may or may not be new).
	batch := uint64(pipeBatch) * uint64(unsafe.Sizeof(CostRow{}))
	if deep > shallow+8*batch {
		t.Errorf("10 rows through a pipe of depth 64 allocated %d bytes, of depth 1 %d: more than 8 batches (%d bytes each) apart", deep, shallow, batch)
	}
}

// A table file keeps every column chunk's min and max in its row group's
// metadata and every page's in the column index, which engines prune by; the
// page headers do not repeat them (table format 7).
func TestTableStatistics(t *testing.T) {
	ctx := context.Background()
	l, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]CostRow, 100)
	for i := range rows {
		rows[i] = CostRow{JobKey: "j", Tenant: "t", RecordID: fmt.Sprintf("r%08d", i+5), CustomID: fmt.Sprintf("c%d", i), Attempt: 1,
			Category: "first_success", LineNo: int64(i + 1), CostUSD: mustMoney(t, fmt.Sprintf("0.%06d", i))}
	}
	key, err := WriteTable(ctx, l, t.TempDir(), "costs", "t", Digest{}, rows)
	if err != nil {
		t.Fatal(err)
	}
	f, pf := testrun.OpenParquet(t, l.LocalPath(key))
	col := slices.IndexFunc(pf.Metadata().Schema[1:], func(e format.SchemaElement) bool { return e.Name == "record_id" })
	if col < 0 {
		t.Fatal("no record_id column")
	}
	rg := pf.Metadata().RowGroups
	if len(rg) != 1 {
		t.Fatalf("%d row groups, want 1", len(rg))
	}
	if s := rg[0].Columns[col].MetaData.Statistics; string(s.MinValue) != "r00000005" || string(s.MaxValue) != "r00000104" {
		t.Errorf("record_id's row group statistics: min %q max %q, want r00000005 and r00000104", s.MinValue, s.MaxValue)
	}
	idx := pf.ColumnIndexes()
	if len(idx) <= col || len(idx[col].MinValues) == 0 || string(idx[col].MinValues[0]) != "r00000005" {
		t.Fatalf("record_id has no column index with its first page's min r00000005: %+v", idx)
	}
	// The first data page's header, read raw: no min or max.
	off := rg[0].Columns[col].MetaData.DataPageOffset
	var h format.PageHeader
	if err := thrift.NewDecoder(new(thrift.CompactProtocol).NewReader(io.NewSectionReader(f, off, pf.Size()-off))).Decode(&h); err != nil {
		t.Fatal(err)
	}
	if h.Type != format.DataPageV2 || !h.DataPageHeaderV2.Valid {
		t.Fatalf("record_id's first page: %+v, want a v2 data page", h)
	}
	if s := h.DataPageHeaderV2.V.Statistics; len(s.MinValue) != 0 || len(s.MaxValue) != 0 || len(s.Min) != 0 || len(s.Max) != 0 {
		t.Errorf("record_id's first page header has statistics: %+v", s)
	}
}
