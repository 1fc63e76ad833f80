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
// elsewhere the commit marker's fsync flushes what they hold.
func flushBehind(f *os.File) {}
