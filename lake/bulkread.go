package lake

import (
	"errors"
	"os"
	"syscall"
	"unsafe"
)

// DirectReader reads a local file of many megabytes that is read once (a
// plan's shards, when a reconcile takes its records to retry from them) past
// the kernel's page cache, with O_DIRECT where the file system takes it.
// Plan wrote those files past the cache too, so they are rarely in it, and
// reading them through it costs the kernel a fresh page for every 4 KiB: on a
// virtual machine measured at 2 ns a byte of system time, against 0.1 with
// O_DIRECT in reads of 1 MiB, which also ran at the disk's full speed.
//
// Every read starts at a multiple of DirectAlign and asks for whole blocks,
// into a buffer whose start is aligned: what direct I/O demands. A file
// system that refuses direct I/O (tmpfs) is read the same way through the
// page cache. A direct read waits for the disk parked where io_uring can be
// used (parkedIO), without holding a P.
type DirectReader struct {
	f      *os.File
	direct bool
}

// DirectAlign is the alignment of DirectReader's reads: offset, length and
// buffer. It is the largest logical block size of common disks.
const DirectAlign = bulkAlign

// OpenDirectReader opens the file at path for DirectReader's reads.
func OpenDirectReader(path string) (*DirectReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &DirectReader{f: f, direct: setDirect(f, true) == nil}, nil
}

// Direct says whether reads bypass the page cache.
func (r *DirectReader) Direct() bool { return r.direct }

// Stat is the file's os.FileInfo.
func (r *DirectReader) Stat() (os.FileInfo, error) { return r.f.Stat() }

// ReadAt reads into b, which AlignedBuffer made (or a slice of it starting at
// a multiple of DirectAlign, whole blocks long), from off, a multiple of
// DirectAlign. It returns fewer bytes, and io.EOF, only at the file's end.
func (r *DirectReader) ReadAt(b []byte, off int64) (int, error) {
	if off%DirectAlign != 0 || len(b)%DirectAlign != 0 || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%DirectAlign != 0 {
		return 0, errors.New("lake: DirectReader.ReadAt: offset, length or buffer not aligned")
	}
	var n int
	var err error
	if r.direct {
		n, err = parkedReadAt(r.f, b, off)
	} else {
		n, err = r.f.ReadAt(b, off)
	}
	if err != nil && r.direct && errors.Is(err, syscall.EINVAL) {
		// A file system that accepted the flag and refuses the read: the
		// rest goes through the page cache.
		r.direct = false
		if serr := setDirect(r.f, false); serr != nil {
			return n, serr
		}
		var m int
		m, err = r.f.ReadAt(b[n:], off+int64(n))
		n += m
	}
	return n, err
}

// Close closes the file.
func (r *DirectReader) Close() error { return r.f.Close() }

// AlignedBuffer returns n bytes, n rounded up to whole DirectAlign blocks,
// starting at an address aligned to DirectAlign.
func AlignedBuffer(n int) []byte {
	n = (n + DirectAlign - 1) / DirectAlign * DirectAlign
	b := make([]byte, n+DirectAlign)
	off := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) % DirectAlign); r != 0 {
		off = DirectAlign - r
	}
	return b[off : off+n : off+n]
}
