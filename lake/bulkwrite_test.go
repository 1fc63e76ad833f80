package lake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestBulkObjectWriter: a bulk object holds exactly the bytes written and is
// stored under their digest, whatever its size against the block and the
// buffer, in the temp folder and in one on the disk (direct I/O where the
// file system has it, as tmpfs has since Linux 6.6: every whole block
// written direct, the tail's last partial one buffered), and with direct I/O
// refused (every write buffered).
//
// Full buffers are written by goroutines of their own, several at once, each
// at its offset; a wrong offset, a buffer reused before its write ended or a
// lost write would show as other bytes.
func TestBulkObjectWriter(t *testing.T) {
	ctx := context.Background()
	l, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	disk := diskTempDir(t, "bulk-test")
	dirs := map[string]string{"temp": t.TempDir(), "disk": disk}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, mode := range []string{"temp", "disk", "refused"} {
		dir := dirs[mode]
		if mode == "refused" {
			dir = disk
		}
		probe, err := CreateTemp(dir, "probe-*")
		if err != nil {
			t.Fatal(err)
		}
		canDirect := setDirect(probe, true) == nil && mode != "refused"
		probe.Close()
		os.Remove(probe.Name())
		// The last size fills every buffer the writer may have in flight,
		// and more.
		for _, size := range []int{0, 1, 4095, 4096, 4097, 1 << 20, 1<<20 + 1, 3<<20 + 17, (bulkInflight+2)<<20 + 4099} {
			t.Run(fmt.Sprintf("%s/%d", mode, size), func(t *testing.T) {
				want := make([]byte, size)
				for i := range want {
					want[i] = byte(rng.Uint32())
				}
				o, err := NewBulkObjectWriter(dir, "bulk-*.jsonl")
				if err != nil {
					t.Fatal(err)
				}
				bw := o.b
				if mode == "refused" {
					bw.buffered()
				}
				for rest := want; len(rest) > 0; { // writes of uneven sizes across the buffer's edge
					n := min(len(rest), 1+rng.IntN(300_000))
					if _, err := o.Write(rest[:n]); err != nil {
						t.Fatal(err)
					}
					rest = rest[n:]
				}
				commitChecked(ctx, t, l, o, want)
				wantDirect := int64(0)
				if canDirect {
					wantDirect = int64(size / bulkAlign * bulkAlign)
				}
				if bw.directBytes != wantDirect {
					t.Errorf("%d bytes written direct, want %d (direct I/O available: %v)", bw.directBytes, wantDirect, canDirect)
				}
				t.Logf("direct I/O available %v: %d of %d bytes written direct", canDirect, bw.directBytes, size)
			})
		}
	}
}

// chunkReader returns its bytes in reads of uneven sizes.
type chunkReader struct {
	b   []byte
	rng *rand.Rand
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 1+r.rng.IntN(200_000))], r.b)
	r.b = r.b[n:]
	return n, nil
}

// TestBulkCopy: bulkCopy copies every byte, whatever the reads' sizes and
// the file's against the buffer; and a local lake stores a file of
// bulkCopyMin bytes or more (a batch's raw output) through it, byte for byte.
func TestBulkCopy(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	dir := t.TempDir()
	for _, size := range []int{0, 1, 4096, 4097, 1 << 20, 3<<20 + 17} {
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(rng.Uint32())
		}
		f, err := CreateTemp(dir, "copy-*")
		if err != nil {
			t.Fatal(err)
		}
		n, err := bulkCopy(f, &chunkReader{want, rng})
		f.Close()
		got, rerr := os.ReadFile(f.Name())
		if err != nil || rerr != nil || n != int64(size) || !bytes.Equal(got, want) {
			t.Errorf("%d bytes: copied %d (%v), read back %d (%v), equal %v", size, n, err, len(got), rerr, bytes.Equal(got, want))
		}
	}
	if testing.Short() {
		return // -short: not the 64 MiB file
	}
	l, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	want := make([]byte, bulkCopyMin+8)
	for i := 0; i < len(want); i += 8 {
		binary.LittleEndian.PutUint64(want[i:], rng.Uint64())
	}
	want = want[:bulkCopyMin+5]
	src := filepath.Join(dir, "output.jsonl")
	if err := os.WriteFile(src, want, 0o644); err != nil {
		t.Fatal(err)
	}
	d, n, err := l.PutFile(ctx, src, ObjectKey)
	if err != nil || d != Sum(want) || n != int64(len(want)) {
		t.Fatalf("PutFile: %s, %d bytes, %v; want %s, %d", d, n, err, Sum(want), len(want))
	}
	if got, err := l.GetVerified(ctx, ObjectKey(d), d); err != nil || !bytes.Equal(got, want) {
		t.Errorf("read back %d bytes, %v; want %d", len(got), err, len(want))
	}
}

// TestBulkObjectWriterAbort: an object given up with writes in flight
// waits for every one of them before its file is closed (its descriptor
// could otherwise be given to the next file while a write to it is under
// way) and removed, and gives its buffers back: the next object, written
// with them, holds its own bytes.
func TestBulkObjectWriterAbort(t *testing.T) {
	ctx := context.Background()
	l, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	dir := diskTempDir(t, "bulk-test")
	// Every write ends late, so that some are in flight at the Abort.
	var ended atomic.Int64
	afterBulkWrite = func() {
		time.Sleep(20 * time.Millisecond)
		ended.Add(1)
	}
	t.Cleanup(func() { afterBulkWrite = nil })
	junk := bytes.Repeat([]byte("x"), (bulkInflight+1)<<20)
	for range 3 {
		o, err := NewBulkObjectWriter(dir, "bulk-*.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		if !o.b.direct {
			t.Skip("no direct I/O on this file system: every write is made before Write returns")
		}
		ended.Store(0)
		if _, err := o.Write(junk); err != nil {
			t.Fatal(err)
		}
		name := o.f.Name()
		o.Abort()
		// Every full buffer was handed to a write; each must have ended.
		if got, want := ended.Load(), int64(bulkInflight+1); got != want {
			t.Fatalf("Abort returned with %d of %d writes ended", got, want)
		}
		if _, err := os.Stat(name); !os.IsNotExist(err) {
			t.Fatalf("aborted object's file %s: %v, want it removed", name, err)
		}
	}
	afterBulkWrite = nil
	want := bytes.Repeat([]byte("0123456789abcdef"), (bulkInflight+1)<<16)
	o, err := NewBulkObjectWriter(dir, "bulk-*.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Write(want); err != nil {
		t.Fatal(err)
	}
	commitChecked(ctx, t, l, o, want)
}

// BenchmarkBulkObjectWriter writes 256 MiB objects through a bulk writer to
// the repository's disk (direct I/O where it has it), in writes of 64 KiB:
// how fast the writer takes a caller's bytes while its buffers are written.
// Run with: go test -run '^$' -bench BulkObjectWriter ./lake/
func BenchmarkBulkObjectWriter(b *testing.B) {
	dir := diskTempDir(b, "bulk-bench")
	const size = 256 << 20
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	b.SetBytes(size)
	for b.Loop() {
		o, err := NewBulkObjectWriterHashedBy(dir, "bulk-*.jsonl", sha256.New()) // not hashed: the caller would
		if err != nil {
			b.Fatal(err)
		}
		for n := 0; n < size; n += len(chunk) {
			if _, err := o.Write(chunk); err != nil {
				b.Fatal(err)
			}
		}
		if err := o.Close(); err != nil {
			b.Fatal(err)
		}
		o.Abort()
	}
}

// diskTempDir is a folder for the test on the repository's disk, removed at
// its end: TMPDIR may be a tmpfs, whose files take no direct I/O (before Linux
// 6.6) and are never written back, so the bulk writer's and reader's disk
// paths would go untested there.
func diskTempDir(tb testing.TB, prefix string) string {
	tb.Helper()
	dir, err := os.MkdirTemp(".", prefix+"-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
