//go:build !linux

package lake

import (
	"errors"
	"io"
	"os"
)

// setDirect: direct I/O is used on Linux only; elsewhere bulk writes go
// through the page cache.
func setDirect(f *os.File, on bool) error {
	if on {
		return errors.ErrUnsupported
	}
	return nil
}

// copyMapped: elsewhere than Linux a file is copied as any reader is
// (done is false).
func copyMapped(dst, src *os.File) (n int64, done bool, err error) {
	return 0, false, nil
}

// flushBehind, flushBehindPath and waitFlushed: the flusher, and markers
// that wait for it, are Linux's (flushbehind_linux.go); elsewhere stored
// files are left to the kernel's writeback.
func flushBehind(f *os.File) {}

func flushBehindPath(path string) {}

func waitFlushed() error { return nil }

// newWriteBehind is the file itself: the writeback is left to the kernel.
func newWriteBehind(f *os.File) io.Writer { return f }
