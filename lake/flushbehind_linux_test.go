package lake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestFlushBehind: a stored file is queued for a flush to stable storage as
// soon as it is complete, once (a bulk object as it is closed, a file
// written through the page cache as it is linked or copied into place), and
// the flush runs and succeeds; a marker, synced by its writer, is not queued.
func TestFlushBehind(t *testing.T) {
	ctx := context.Background()
	l := openLake(t, t.TempDir())
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
	queued := func(what string, want int64, put func()) {
		t.Helper()
		q := flushesQueued()
		put()
		if got := flushesQueued() - q; got != want {
			t.Fatalf("%s: %d flushes queued, want %d", what, got, want)
		}
		for range want {
			wait(what)
		}
	}
	dir := diskTempDir(t, "flush-test")
	data := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB

	// A bulk object is queued as it is closed, before it is stored; its
	// link queues it again unless that flush is still pending.
	q := flushesQueued()
	o, err := NewBulkObjectWriter(dir, "bulk-*.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	o.Write(data)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if got := flushesQueued() - q; got != 1 {
		t.Fatalf("a bulk object, closed: %d flushes queued, want 1", got)
	}
	key, d, err := o.Commit(ctx, l, ObjectKey)
	if err != nil {
		t.Fatal(err)
	}
	n := flushesQueued() - q
	if n != 1 && n != 2 {
		t.Fatalf("a bulk object, stored: %d flushes queued, want 1 or 2", n)
	}
	for range n {
		wait("a bulk object")
	}
	if got, err := l.GetVerified(ctx, key, d); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the flushed object reads back %d bytes, %v", len(got), err)
	}
	queued("an object through the page cache", 1, func() {
		o, err := NewObjectWriter(dir, "small-*.json")
		if err != nil {
			t.Fatal(err)
		}
		o.Write([]byte("another object"))
		if _, _, err := o.Commit(ctx, l, ObjectKey); err != nil {
			t.Fatal(err)
		}
	})
	queued("a marker", 0, func() {
		if _, err := l.PutJSON(ctx, "markers/m.json", "test/v1", map[string]int{"a": 1}); err != nil {
			t.Fatal(err)
		}
	})

	if testing.Short() {
		return // -short: not the 64 MiB file
	}
	src := filepath.Join(dir, "output.jsonl")
	if err := os.WriteFile(src, bytes.Repeat([]byte("x"), bulkCopyMin+5), 0o644); err != nil {
		t.Fatal(err)
	}
	queued("a file copied past the page cache", 1, func() {
		if _, _, err := l.PutFile(ctx, src, ObjectKey); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMarkerAfterFlushes: a marker is written only once every file queued
// before it has been flushed, so that it never names a file still in a
// volatile cache.
func TestMarkerAfterFlushes(t *testing.T) {
	ctx := context.Background()
	l := openLake(t, t.TempDir())
	var flushesDone atomic.Int64
	afterFlushBehind = func(error) {
		time.Sleep(50 * time.Millisecond)
		flushesDone.Add(1)
	}
	t.Cleanup(func() { afterFlushBehind = nil })
	dir := diskTempDir(t, "flush-order")
	for i := range 3 {
		o, err := NewObjectWriter(dir, "obj-*.json")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(o, "object %d", i)
		if _, _, err := o.Commit(ctx, l, ObjectKey); err != nil {
			t.Fatal(err)
		}
	}
	// flushLoop counts a flush done after its hook: the marker waits for
	// the count, so every hook has returned by then.
	if _, err := l.PutJSON(ctx, "markers/after.json", "test/v1", map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if got := flushesDone.Load(); got < 3 {
		t.Fatalf("the marker was written with %d of 3 flushes done", got)
	}
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

// TestMarkerAfterFailedFlush: once a file could not be flushed (here: it
// could not even be opened to be queued), a marker is refused, and not
// written, for the files it names may not be on the disk.
func TestMarkerAfterFailedFlush(t *testing.T) {
	ctx := context.Background()
	l := openLake(t, t.TempDir())
	t.Cleanup(func() {
		flushMu.Lock()
		flushErr = nil
		flushMu.Unlock()
	})
	gone := filepath.Join(t.TempDir(), "gone.parquet")
	flushBehindPath(gone)
	_, err := l.PutJSON(ctx, "markers/refused.json", "test/v1", map[string]int{"a": 1})
	if err == nil || !strings.Contains(err.Error(), "flush "+gone) {
		t.Fatalf("marker after a failed flush: %v, want the flush's error", err)
	}
	if ok, err := l.Exists(ctx, "markers/refused.json"); ok || err != nil {
		t.Fatalf("the refused marker exists: %v, %v", ok, err)
	}
}

// flushesQueued is the number of files queued for a flush so far.
func flushesQueued() int64 {
	flushMu.Lock()
	defer flushMu.Unlock()
	return flushQueuedN
}

// TestWriteBehind: an object stored into a local lake on its file system
// starts its file's writeback every writeBehindChunk bytes as they are
// written, over exactly the bytes written so far, and is stored with the
// digest of its bytes; one for a remote lake (its file only uploaded) or for
// a lake on another file system (copied) starts none.
func TestWriteBehind(t *testing.T) {
	ctx := context.Background()
	type started struct{ start, n int64 }
	var got []started
	afterWriteBehind = func(start, n int64, err error) {
		if err != nil {
			t.Errorf("writeback of %d bytes at %d: %v", n, start, err)
		}
		got = append(got, started{start, n})
	}
	t.Cleanup(func() { afterWriteBehind = nil })
	data := bytes.Repeat([]byte("0123456789abcdef"), (2*writeBehindChunk+12345)/16)
	objects := diskTempDir(t, "write-behind")
	write := func(l *Lake) *ObjectWriter {
		t.Helper()
		o, err := NewObjectWriter(objects, "obj-*")
		if err != nil {
			t.Fatal(err)
		}
		o.writeBehindFor(l)
		for rest := data; len(rest) > 0; rest = rest[min(len(rest), 300_000):] {
			if _, err := o.Write(rest[:min(len(rest), 300_000)]); err != nil {
				t.Fatal(err)
			}
		}
		return o
	}
	lakeDir, err := filepath.Abs(diskTempDir(t, "write-behind-lake")) // the objects' file system
	if err != nil {
		t.Fatal(err)
	}
	l := openLake(t, lakeDir)
	key, d, err := write(l).Commit(ctx, l, ObjectKey)
	if err != nil {
		t.Fatal(err)
	}
	if d != Digest(sha256.Sum256(data)) {
		t.Errorf("stored as %s, want the digest of its bytes", d.Hex())
	}
	if b, err := os.ReadFile(l.LocalPath(key)); err != nil || !bytes.Equal(b, data) {
		t.Errorf("the stored object is not the bytes written (%d of %d bytes, %v)", len(b), len(data), err)
	}
	// The object's buffer hands the file 1 MiB at a time: the writeback is
	// started once 4 MiB or more are written since the last start.
	if len(got) != 2 || got[0].start != 0 || got[1].start != got[0].n || got[0].n < writeBehindChunk || got[1].n < writeBehindChunk ||
		got[1].start+got[1].n > int64(len(data)) {
		t.Errorf("writeback started over %v, want two consecutive ranges of %d bytes or more from 0, within the %d written", got, writeBehindChunk, len(data))
	}
	got = nil
	write(&Lake{}).Abort() // a lake without a local folder: a remote one's case
	if len(got) != 0 {
		t.Errorf("an object for a remote lake started its writeback over %v", got)
	}
	// A local lake on another file system (where the tests' temporary
	// folder is in memory): the object is copied into it, not linked.
	if other := t.TempDir(); otherDevice(objects, other) {
		got = nil
		write(openLake(t, other)).Abort()
		if len(got) != 0 {
			t.Errorf("an object for a lake on another file system started its writeback over %v", got)
		}
	}
}
