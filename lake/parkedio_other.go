//go:build !linux

package lake

import "os"

const (
	uringOpRead  = 22
	uringOpWrite = 23
)

// parkedIO: io_uring is Linux's; elsewhere the caller makes the plain call.
func parkedIO(f *os.File, op uint8, b []byte, off int64) (n int, done bool, err error) {
	return 0, false, nil
}
