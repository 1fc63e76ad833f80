package lake

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// copyPair writes data to a new file at path and opens it, and creates a
// temp file beside it to copy it to; both are closed at the test's end.
func copyPair(t *testing.T, path string, data []byte) (src, dst *os.File) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	if dst, err = CreateTemp(filepath.Dir(path), "dst-*"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dst.Close(); os.Remove(dst.Name()) })
	return src, dst
}

// cachedPages is the number of f's pages in the page cache.
func cachedPages(t *testing.T, f *os.File) int {
	t.Helper()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return 0
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestCopyMapped: a file copied from its mapping holds exactly its bytes,
// however its size falls against the chunk and the block, on the disk (past
// the page cache where the disk takes direct I/O) and in the temp folder; a
// source not at its start is left to the reader's copy.
func TestCopyMapped(t *testing.T) {
	defer func(c int64) { mappedChunk = c }(mappedChunk)
	mappedChunk = 64 << 10
	disk := diskTempDir(t, "mapped-test")
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dir := range []string{disk, t.TempDir()} {
		for _, size := range []int{0, 1, 4095, 4096, 4097, 64 << 10, 64<<10 + 4096, 3*(64<<10) + 17} {
			t.Run(fmt.Sprintf("%s/%d", filepath.Base(dir), size), func(t *testing.T) {
				want := make([]byte, size)
				for i := range want {
					want[i] = byte(rng.Uint32())
				}
				src, dst := copyPair(t, filepath.Join(dir, fmt.Sprintf("src-%d", size)), want)
				canDirect := setDirect(dst, true) == nil
				setDirect(dst, false)
				n, done, err := copyMapped(dst, src)
				if err != nil || !done || n != int64(size) {
					t.Fatalf("copyMapped: %d bytes, done %v, %v; want %d, done (direct I/O available: %v)", n, done, err, size, canDirect)
				}
				if dir == disk && canDirect {
					// Past the page cache: at most the tail's page is in it.
					if cached := cachedPages(t, dst); cached > 1 {
						t.Errorf("%d of the copy's pages are in the page cache, want at most the tail's", cached)
					}
				}
				dst.Close()
				if got, err := os.ReadFile(dst.Name()); err != nil || !bytes.Equal(got, want) {
					t.Errorf("read back %d bytes (%v), equal %v; want %d", len(got), err, bytes.Equal(got, want), size)
				}
			})
		}
	}
	// Not at its start: nothing written, the caller copies.
	src, dst := copyPair(t, filepath.Join(disk, "src-seeked"), bytes.Repeat([]byte("x"), 10_000))
	src.Seek(100, 0)
	if n, done, err := copyMapped(dst, src); done || n != 0 || err != nil {
		t.Errorf("a source at offset 100: %d bytes, done %v, %v; want 0, not done", n, done, err)
	}
	if n, err := bulkCopy(dst, src); err != nil || n != 9_900 {
		t.Errorf("bulkCopy of a source at offset 100: %d bytes, %v; want 9900", n, err)
	}
}

// TestCopyMappedShrinks: a file cut short while it is copied gives a count
// short of its size, and no error (the kernel refuses the mapping's pages
// past the new end), so that the caller says the file changed.
func TestCopyMappedShrinks(t *testing.T) {
	defer func(c int64) { mappedChunk = c }(mappedChunk)
	defer func() { beforeMappedWrite = nil }()
	mappedChunk = 64 << 10
	dir := diskTempDir(t, "mapped-test")
	path := filepath.Join(dir, "src")
	size := 4 * (64 << 10)
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	writes := 0
	beforeMappedWrite = func() {
		if writes++; writes == 2 {
			if err := os.Truncate(path, 70<<10); err != nil {
				t.Error(err)
			}
		}
	}
	src, dst := copyPair(t, path, data)
	n, done, err := copyMapped(dst, src)
	if err != nil || !done || n >= int64(size) {
		t.Fatalf("copyMapped of a file cut to 70 KiB: %d bytes, done %v, %v; want fewer than %d, done, no error", n, done, err, size)
	}
	if writes < 2 {
		t.Fatalf("%d writes, want the cut before the second", writes)
	}

	// Through bulkCopy, from the start again: createOnce compares the
	// count with the size it was given, and stores nothing.
	writes = 0
	src2, dst2 := copyPair(t, path, data)
	if n, err := bulkCopy(dst2, src2); err != nil || n >= int64(size) {
		t.Errorf("bulkCopy of a file cut to 70 KiB: %d bytes, %v; want fewer than %d, no error", n, err, size)
	}
}
