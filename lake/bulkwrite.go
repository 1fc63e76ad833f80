package lake

import (
	"errors"
	"hash"
	"io"
	"os"
	"sync"
	"syscall"
)

// bulkAlign is the alignment direct I/O asks of a write's buffer, length
// and file offset: the largest logical block size of common disks.
const bulkAlign = 4096

// bulkBuffers keeps bulkWriters' aligned 1 MiB buffers (*[]byte, empty)
// between objects.
var bulkBuffers = sync.Pool{New: func() any {
	b := AlignedBuffer(1 << 20)[:0]
	return &b
}}

// bulkWriter writes a new file of many megabytes that nothing reads soon
// after (a plan's shards) past the kernel's page cache, with O_DIRECT where
// the file system takes it: the kernel then moves the bytes from the buffer
// to the disk, instead of copying them into cache pages that it must first
// reclaim from other files once memory is full (at 10M records a plan
// writes 6.5 GB of shards; buffered, copying them cost 1.1-1.6 ns a byte of
// system time, and pushed the job's own inputs out of the cache). Whole
// buffers are written direct; the tail, which need not fill a block, and
// every write after a file system refuses direct I/O, go through the page
// cache as any write does. A direct write waits for the disk parked where
// io_uring can be used (parkedIO), without holding a P. The bytes are hashed
// as they are written, if h is not nil.
type bulkWriter struct {
	f      *os.File
	h      hash.Hash
	buf    []byte // aligned to bulkAlign; its cap a multiple of it
	pooled *[]byte
	direct bool
	// directBytes counts the bytes written direct.
	directBytes int64
}

func newBulkWriter(f *os.File, h hash.Hash) *bulkWriter {
	p := bulkBuffers.Get().(*[]byte)
	w := &bulkWriter{f: f, h: h, buf: *p, pooled: p}
	w.direct = setDirect(f, true) == nil
	return w
}

func (w *bulkWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := copy(w.buf[len(w.buf):cap(w.buf)], p)
		w.buf = w.buf[:len(w.buf)+c]
		p, n = p[c:], n+c
		if err := w.spill(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// spill writes the buffer once it is full, and empties it.
func (w *bulkWriter) spill() error {
	if len(w.buf) < cap(w.buf) {
		return nil
	}
	err := w.write(w.buf)
	w.buf = w.buf[:0]
	return err
}

// write hashes and writes b, which starts at an aligned offset of the file
// and of the buffer: direct if b is whole blocks and the file takes it.
func (w *bulkWriter) write(b []byte) error {
	if w.h != nil {
		w.h.Write(b)
	}
	if w.direct && len(b)%bulkAlign != 0 {
		if err := w.buffered(); err != nil {
			return err
		}
	}
	direct := w.direct
	var n int
	var err error
	if direct {
		n, err = parkedWrite(w.f, b)
	} else {
		n, err = w.f.Write(b)
	}
	if direct {
		w.directBytes += int64(n)
	}
	if err != nil && direct && errors.Is(err, syscall.EINVAL) {
		// A file system that accepted the flag and refuses the write: the
		// rest goes through the page cache.
		if err := w.buffered(); err != nil {
			return err
		}
		_, err = w.f.Write(b[n:])
	}
	return err
}

// buffered turns direct I/O off for the rest of the file.
func (w *bulkWriter) buffered() error {
	w.direct = false
	return setDirect(w.f, false)
}

// Flush writes what is buffered (the file's tail) and gives the buffer
// back; nothing may be written after it.
func (w *bulkWriter) Flush() error {
	b := w.buf
	var err error
	if whole := len(b) / bulkAlign * bulkAlign; whole > 0 {
		err = w.write(b[:whole])
		b = b[whole:]
	}
	if err == nil && len(b) > 0 {
		err = w.write(b)
	}
	bulkBuffers.Put(w.pooled)
	w.buf, w.pooled = nil, nil
	return err
}

// bulkCopyMin is the size from which a local lake stores a file by bulkCopy:
// a batch's raw output or input, which nothing reads soon after it is
// archived (verify does, in its own time).
const bulkCopyMin = 64 << 20

// bulkCopy copies r to the new file f past the page cache, as bulkWriter
// writes (reading straight into its aligned buffer), and returns the number
// of bytes copied. A file r on Linux is copied by copyMapped instead.
func bulkCopy(f *os.File, r io.Reader) (int64, error) {
	if src, ok := r.(*os.File); ok {
		if n, done, err := copyMapped(f, src); done {
			return n, err
		}
	}
	w := newBulkWriter(f, nil)
	var n int64
	for {
		k, err := r.Read(w.buf[len(w.buf):cap(w.buf)])
		w.buf = w.buf[:len(w.buf)+k]
		n += int64(k)
		if err == nil {
			err = w.spill()
		}
		if err != nil {
			ferr := w.Flush()
			if err == io.EOF {
				err = ferr
			}
			return n, err
		}
	}
}
