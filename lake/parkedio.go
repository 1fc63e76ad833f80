package lake

import (
	"io"
	"os"
)

// parkedWrite writes b at f's position as f.Write does, waiting for the
// disk parked where io_uring can be used (parkedIO): for direct writes.
func parkedWrite(f *os.File, b []byte) (int, error) {
	if n, done, err := parkedIO(f, uringOpWrite, b, -1); done {
		return n, err
	}
	return f.Write(b)
}

// parkedReadAt reads b at off as f.ReadAt does, waiting for the disk parked
// where io_uring can be used (parkedIO): for direct reads.
func parkedReadAt(f *os.File, b []byte, off int64) (int, error) {
	if n, done, err := parkedIO(f, uringOpRead, b, off); done {
		if err == nil && n < len(b) {
			err = io.EOF
		}
		return n, err
	}
	return f.ReadAt(b, off)
}
