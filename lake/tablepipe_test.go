package lake

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"unsafe"
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
