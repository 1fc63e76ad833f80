package lake

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestCopyMapped: a file copied from its mapping holds exactly its bytes,
// however its size falls against the chunk and the block, with direct I/O
// where the disk takes it and through the page cache where it is refused;
// a source not at its start is left to the reader's copy.
func TestCopyMapped(t *testing.T) {
	defer func(c int64) { mappedChunk = c }(mappedChunk)
	mappedChunk = 64 << 10
	disk, err := os.MkdirTemp(".", "mapped-test-") // the repository's disk, not a tmpfs TMPDIR
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(disk) })
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dir := range []string{disk, t.TempDir()} {
		for _, size := range []int{0, 1, 4095, 4096, 4097, 64 << 10, 64<<10 + 4096, 3*(64<<10) + 17} {
			t.Run(fmt.Sprintf("%s/%d", filepath.Base(dir), size), func(t *testing.T) {
				want := make([]byte, size)
				for i := range want {
					want[i] = byte(rng.Uint32())
				}
				path := filepath.Join(dir, fmt.Sprintf("src-%d", size))
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
				src, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer src.Close()
				dst, err := CreateTemp(dir, "dst-*")
				if err != nil {
					t.Fatal(err)
				}
				defer os.Remove(dst.Name())
				canDirect := setDirect(dst, true) == nil
				setDirect(dst, false)
				n, done, err := copyMapped(dst, src)
				dst.Close()
				if err != nil || !done || n != int64(size) {
					t.Fatalf("copyMapped: %d bytes, done %v, %v; want %d, done (direct I/O available: %v)", n, done, err, size, canDirect)
				}
				if got, err := os.ReadFile(dst.Name()); err != nil || !bytes.Equal(got, want) {
					t.Errorf("read back %d bytes (%v), equal %v; want %d", len(got), err, bytes.Equal(got, want), size)
				}
			})
		}
	}
	// Not at its start: nothing written, the caller copies.
	path := filepath.Join(disk, "src-seeked")
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 10_000), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	src.Seek(100, 0)
	dst, err := CreateTemp(disk, "dst-*")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(dst.Name())
	defer dst.Close()
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
	dir, err := os.MkdirTemp(".", "mapped-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "src")
	size := 4 * (64 << 10)
	if err := os.WriteFile(path, bytes.Repeat([]byte("0123456789abcdef"), size/16), 0o644); err != nil {
		t.Fatal(err)
	}
	writes := 0
	beforeMappedWrite = func() {
		if writes++; writes == 2 {
			if err := os.Truncate(path, 70<<10); err != nil {
				t.Error(err)
			}
		}
	}
	src, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := CreateTemp(dir, "dst-*")
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	n, done, err := copyMapped(dst, src)
	if err != nil || !done || n >= int64(size) {
		t.Fatalf("copyMapped of a file cut to 70 KiB: %d bytes, done %v, %v; want fewer than %d, done, no error", n, done, err, size)
	}
	if writes < 2 {
		t.Fatalf("%d writes, want the cut before the second", writes)
	}

	// Through bulkCopy, from the start again: createOnce compares the
	// count with the size it was given, and stores nothing.
	if err := os.WriteFile(path, bytes.Repeat([]byte("0123456789abcdef"), size/16), 0o644); err != nil {
		t.Fatal(err)
	}
	writes = 0
	src2, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	dst2, err := CreateTemp(dir, "dst-*")
	if err != nil {
		t.Fatal(err)
	}
	defer dst2.Close()
	if n, err := bulkCopy(dst2, src2); err != nil || n >= int64(size) {
		t.Errorf("bulkCopy of a file cut to 70 KiB: %d bytes, %v; want fewer than %d, no error", n, err, size)
	}
}
