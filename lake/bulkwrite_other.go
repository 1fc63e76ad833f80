//go:build !linux

package lake

import (
	"errors"
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

// flushBehind: files are written past the page cache on Linux only;
// elsewhere they go through it, and the kernel writes them back in its time.
func flushBehind(f *os.File) {}

// flushBehindPath and waitFlushed: see flushBehind.
func flushBehindPath(path string) {}

func waitFlushed() error { return nil }
