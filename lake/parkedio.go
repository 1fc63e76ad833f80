package lake

import (
	"io"
	"os"
)

// parkedWriteAt writes b at off as f.WriteAt does, waiting for the disk
// parked where io_uring can be used (parkedIO): for direct writes.
func parkedWriteAt(f *os.File, b []byte, off int64) (int, error) {
	if n, done, err := parkedIO(f, uringOpWrite, b, off); done {
		return n, err
	}
	return f.WriteAt(b, off)
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
