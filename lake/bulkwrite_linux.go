package lake

import (
	"errors"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// setDirect turns O_DIRECT on or off for f; an error (EINVAL from a file
// system without direct I/O, such as tmpfs) leaves it as it was.
func setDirect(f *os.File, on bool) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		var flags int
		if flags, serr = unix.FcntlInt(fd, unix.F_GETFL, 0); serr != nil {
			return
		}
		if on {
			flags |= unix.O_DIRECT
		} else {
			flags &^= unix.O_DIRECT
		}
		_, serr = unix.FcntlInt(fd, unix.F_SETFL, flags)
	})
	if err != nil {
		return err
	}
	return serr
}

// mappedChunk is how much of its source copyMapped maps and writes at once.
// Where io_uring cannot be used (parkedIO), a write past the page cache
// waits for the disk in the system call, and the Go runtime hands the P of a
// goroutine in a system call to another thread only once it has seen it
// there at two of its checks, which come up to 10 ms apart: a write of 1 MiB
// (under a millisecond) keeps a core from every other goroutine for the
// whole of its wait, a write of 64 MiB (30-50 ms on a disk of 1.3-2.1 GB/s)
// for the first check or two of it. The mapping's pages count in the
// process's resident memory while it is written. A variable for the tests.
var mappedChunk int64 = 64 << 20

// beforeMappedWrite, if set, is called before each of copyMapped's writes
// (the tests).
var beforeMappedWrite func()

// copyMapped copies the file src, from its start, to the new file dst with
// direct I/O from a read-only mapping of src, a chunk at a time: the kernel
// moves the bytes from src's pages in its cache to the disk, with no copy
// through a buffer. The tail that does not fill a block is copied through
// the page cache. done is false, and nothing is written, where it does not
// apply (src is not a regular file or is not at its start, dst refuses
// direct I/O, src cannot be mapped); then the caller copies as it would any
// reader. The bytes are read until src's end, as a reader's would be, so a
// file that grew or shrank while it was copied gives a count the caller can
// check against the size it expected.
func copyMapped(dst, src *os.File) (n int64, done bool, err error) {
	fi, err := src.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return 0, false, nil
	}
	if pos, err := src.Seek(0, io.SeekCurrent); err != nil || pos != 0 {
		return 0, false, nil
	}
	if setDirect(dst, true) != nil {
		return 0, false, nil
	}
	rc, err := src.SyscallConn()
	if err != nil {
		return 0, false, setDirect(dst, false)
	}
	w := &bulkWriter{f: dst, direct: true}
	whole := fi.Size() &^ (bulkAlign - 1)
	for n < whole {
		var m []byte
		var merr error
		if err := rc.Control(func(fd uintptr) {
			m, merr = unix.Mmap(int(fd), n, int(min(mappedChunk, whole-n)), unix.PROT_READ, unix.MAP_SHARED)
		}); err != nil {
			merr = err
		}
		if merr != nil {
			if n == 0 {
				return 0, false, setDirect(dst, false)
			}
			return n, true, merr
		}
		if beforeMappedWrite != nil {
			beforeMappedWrite()
		}
		werr := w.write(m) // as a bulk object's whole buffers are
		unix.Munmap(m)
		if errors.Is(werr, syscall.EFAULT) {
			// The file ends inside the mapping: it shrank while it was
			// copied. The short count tells the caller.
			return n, true, nil
		}
		if werr != nil {
			return n, true, werr
		}
		n += int64(len(m))
	}
	if err := setDirect(dst, false); err != nil {
		return n, true, err
	}
	if _, err := src.Seek(n, io.SeekStart); err != nil {
		return n, true, err
	}
	// The bulk writer writes at offsets: the tail goes on from the last.
	if _, err := dst.Seek(n, io.SeekStart); err != nil {
		return n, true, err
	}
	k, err := io.Copy(dst, src)
	return n + k, true, err
}
