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
