package lake

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// needRing skips the test where this kernel or sandbox refuses io_uring:
// there the callers make the plain calls, which the other tests cover.
func needRing(t *testing.T) {
	t.Helper()
	r := getRing()
	if r == nil {
		t.Skip("io_uring is not available here")
	}
	putRing(r)
}

// TestParkedIO: writes at the file's position and at offsets, and reads at
// offsets, through io_uring give the bytes the plain calls would, stop at
// the file's end, and report the kernel's errors.
func TestParkedIO(t *testing.T) {
	needRing(t)
	data := make([]byte, 3<<20+12345)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ops := parkedOps.Load()
	// At the position: in two pieces, so the second follows the first.
	for _, part := range [][]byte{data[:1<<20], data[1<<20:]} {
		n, done, err := parkedIO(f, uringOpWrite, part, -1)
		if !done || err != nil || n != len(part) {
			t.Fatalf("write at the position: %d, %v, %v", n, done, err)
		}
	}
	if pos, _ := f.Seek(0, io.SeekCurrent); pos != int64(len(data)) {
		t.Fatalf("the file's position is %d after the writes, want %d", pos, len(data))
	}
	// At an offset: overwrite a middle piece.
	patch := bytes.Repeat([]byte{0xA5}, 5000)
	copy(data[777:], patch)
	if n, done, err := parkedIO(f, uringOpWrite, patch, 777); !done || err != nil || n != len(patch) {
		t.Fatalf("write at 777: %d, %v, %v", n, done, err)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the file differs from what was written (%d bytes, %v)", len(got), err)
	}
	for _, c := range []struct {
		off    int64
		n, got int
	}{
		{0, 4096, 4096},
		{12345, 1 << 20, 1 << 20},
		{int64(len(data)) - 100, 4096, 100}, // past the end: short
		{int64(len(data)), 4096, 0},
		{int64(len(data)) + 9999, 10, 0},
	} {
		b := make([]byte, c.n)
		n, done, err := parkedIO(f, uringOpRead, b, c.off)
		if !done || err != nil || n != c.got {
			t.Fatalf("read %d at %d: %d, %v, %v; want %d", c.n, c.off, n, done, err, c.got)
		}
		if n > 0 && !bytes.Equal(b[:n], data[c.off:c.off+int64(n)]) {
			t.Fatalf("read %d at %d: other bytes", c.n, c.off)
		}
	}
	if parkedOps.Load() == ops {
		t.Fatal("no request went through io_uring")
	}
	// The kernel's error, as the plain call gives it.
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, done, err := parkedIO(ro, uringOpWrite, []byte("x"), -1); !done || !errors.Is(err, syscall.EBADF) {
		t.Fatalf("write to a read-only file: %v, %v; want EBADF", done, err)
	}
	var pe *os.PathError
	if _, _, err := parkedIO(ro, uringOpWrite, []byte("x"), 0); !errors.As(err, &pe) || pe.Path != path {
		t.Fatalf("the error %v does not name the file", err)
	}
}

// TestParkedIOConcurrent: goroutines sharing the rings each get their own
// bytes (go test -race covers the handing over of rings).
func TestParkedIOConcurrent(t *testing.T) {
	needRing(t)
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := bytes.Repeat([]byte{byte(g)}, 64<<10+g)
			f, err := os.Create(filepath.Join(dir, string(rune('a'+g))))
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			for range 8 {
				if _, _, err := parkedIO(f, uringOpWrite, want, -1); err != nil {
					errs <- err
					return
				}
			}
			b := make([]byte, len(want))
			for i := range 8 {
				if n, _, err := parkedIO(f, uringOpRead, b, int64(i*len(want))); err != nil || n != len(b) || !bytes.Equal(b, want) {
					errs <- errors.New("a read got other bytes")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestParkedIOUnavailable: where io_uring cannot be used, nothing is done
// and the bulk writer and the direct reader make the plain calls.
func TestParkedIOUnavailable(t *testing.T) {
	defer func(was bool) { noUring.Store(was) }(noUring.Load())
	noUring.Store(true)
	for { // the idle rings too
		r := getRing()
		if r == nil {
			break
		}
		defer putRing(r)
	}
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, done, err := parkedIO(f, uringOpWrite, []byte("abc"), -1); done || n != 0 || err != nil {
		t.Fatalf("parkedIO without io_uring: %d, %v, %v", n, done, err)
	}
	if done, err := parkedDatasync(int(f.Fd())); done || err != nil {
		t.Fatalf("parkedDatasync without io_uring: %v, %v", done, err)
	}
	ops := parkedOps.Load()
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB: one whole buffer
	w := newBulkWriter(f, nil)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r, err := OpenDirectReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := AlignedBuffer(len(data) + DirectAlign)
	n, err := r.ReadAt(b, 0)
	if n != len(data) || !errors.Is(err, io.EOF) || !bytes.Equal(b[:n], data) {
		t.Fatalf("read back %d bytes, %v", n, err)
	}
	if parkedOps.Load() != ops {
		t.Fatal("a request went through io_uring though it is off")
	}
}

// TestParkedBulk: where a file takes direct I/O, the bulk writer's direct
// writes and the direct reader's reads wait parked, through io_uring.
func TestParkedBulk(t *testing.T) {
	needRing(t)
	dir := diskTempDir(t, "parked-test")
	path := filepath.Join(dir, "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := make([]byte, 2<<20+100)
	for i := range data {
		data[i] = byte(i * 7)
	}
	ops := parkedOps.Load()
	w := newBulkWriter(f, nil)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if w.directBytes == 0 {
		t.Skip("this file system refuses direct I/O")
	}
	if parkedOps.Load()-ops < 2 {
		t.Fatalf("%d of the bulk writer's direct writes went through io_uring, want 2", parkedOps.Load()-ops)
	}
	r, err := OpenDirectReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ops = parkedOps.Load()
	b := AlignedBuffer(len(data))
	n, err := r.ReadAt(b, 0)
	if n != len(data) || !errors.Is(err, io.EOF) || !bytes.Equal(b[:n], data) {
		t.Fatalf("read back %d bytes, %v", n, err)
	}
	if parkedOps.Load() == ops {
		t.Fatal("the direct reader's read did not go through io_uring")
	}
}
