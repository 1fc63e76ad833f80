package lake

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestFlushBehind: a file written past the page cache is queued for a flush
// as soon as it is complete, and the flush runs and succeeds; a file written
// through the page cache, or synced by its writer, is not queued.
func TestFlushBehind(t *testing.T) {
	ctx := context.Background()
	l, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	flushed := make(chan error, 16)
	afterFlushBehind = func(err error) { flushed <- err }
	t.Cleanup(func() { afterFlushBehind = nil })
	wait := func(what string) {
		t.Helper()
		select {
		case err := <-flushed:
			if err != nil {
				t.Fatalf("%s: flush: %v", what, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: queued, never flushed", what)
		}
	}
	dir := diskTempDir(t, "flush-test")
	data := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB

	q := flushesQueued.Load()
	o, err := NewBulkObjectWriter(dir, "bulk-*.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	o.Write(data)
	key, d, err := o.Commit(ctx, l, ObjectKey)
	if err != nil {
		t.Fatal(err)
	}
	if got := flushesQueued.Load() - q; got != 1 {
		t.Fatalf("a bulk object: %d flushes queued, want 1", got)
	}
	wait("a bulk object")
	if got, err := l.GetVerified(ctx, key, d); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the flushed object reads back %d bytes, %v", len(got), err)
	}

	q = flushesQueued.Load()
	o, err = NewObjectWriter(dir, "small-*.json")
	if err != nil {
		t.Fatal(err)
	}
	o.Write(data)
	if _, _, err := o.Commit(ctx, l, ObjectKey); err != nil {
		t.Fatal(err)
	}
	if _, err := l.PutJSON(ctx, "markers/m.json", "test/v1", map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if got := flushesQueued.Load() - q; got != 0 {
		t.Fatalf("an object through the page cache and a synced marker: %d flushes queued, want 0", got)
	}

	if testing.Short() {
		return // -short: not the 64 MiB file
	}
	src := filepath.Join(dir, "output.jsonl")
	if err := os.WriteFile(src, bytes.Repeat([]byte("x"), bulkCopyMin+5), 0o644); err != nil {
		t.Fatal(err)
	}
	q = flushesQueued.Load()
	if _, _, err := l.PutFile(ctx, src, ObjectKey); err != nil {
		t.Fatal(err)
	}
	if got := flushesQueued.Load() - q; got != 1 {
		t.Fatalf("a file copied past the page cache: %d flushes queued, want 1", got)
	}
	wait("a file copied past the page cache")
}

// TestParkedDatasync: an fdatasync through io_uring succeeds on a file and
// reports the kernel's error on a descriptor that is not open.
func TestParkedDatasync(t *testing.T) {
	needRing(t)
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write([]byte("abc"))
	if done, err := parkedDatasync(int(f.Fd())); !done || err != nil {
		t.Fatalf("parkedDatasync: done %v, %v", done, err)
	}
	if done, err := parkedDatasync(1 << 20); !done || !errors.Is(err, syscall.EBADF) {
		t.Fatalf("parkedDatasync of no file: done %v, %v; want EBADF", done, err)
	}
}
