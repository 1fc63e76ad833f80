package lake

import (
	"errors"
	"hash"
	"io"
	"os"
	"syscall"
)

// bulkAlign is the alignment direct I/O asks of a write's buffer, length
// and file offset: the largest logical block size of common disks.
const bulkAlign = 4096

// bulkBuffers keeps bulkWriters' aligned 1 MiB buffers between files, up to
// two writers' worth. A plan writes its shards one after another, each with
// up to bulkInflight buffers; a sync.Pool would drop them at a collection,
// to be allocated and faulted in again.
var bulkBuffers = make(chan []byte, 2*bulkInflight)

// getBulkBuffer returns an empty aligned buffer of 1 MiB.
func getBulkBuffer() []byte {
	select {
	case b := <-bulkBuffers:
		return b[:0]
	default:
		return AlignedBuffer(1 << 20)[:0]
	}
}

// putBulkBuffer keeps b for another writer, if there is room.
func putBulkBuffer(b []byte) {
	select {
	case bulkBuffers <- b[:0]:
	default:
	}
}

// bulkWriter writes a new file of many megabytes that nothing reads soon
// after (a plan's shards) past the kernel's page cache, with O_DIRECT where
// the file system takes it: the kernel then moves the bytes from the buffer
// to the disk, instead of copying them into cache pages that it must first
// reclaim from other files once memory is full (at 10M records a plan
// writes 6.5 GB of shards; buffered, copying them cost 1.1-1.6 ns a byte of
// system time, and pushed the job's own inputs out of the cache). Whole
// buffers are written direct; the tail, which need not fill a block, and
// every write after a file system refuses direct I/O, go through the page
// cache as any write does. The bytes are hashed as they are written, if h
// is not nil.
//
// A direct write waits for the disk parked where io_uring can be used
// (parkedIO), without holding a P, and in a goroutine of its own: up to
// bulkInflight-1 full buffers are written, each at its offset, while the
// caller fills the next. Written one at a time, a plan's records goroutine,
// which writes the shards, spent nearly half its time waiting for the disk,
// and the parsing cores waited for it.
type bulkWriter struct {
	f   *os.File
	h   hash.Hash
	buf []byte // aligned to bulkAlign; its cap a multiple of it
	off int64  // the file offset of buf's first byte
	// inflight are the direct writes under way, oldest first.
	inflight []*bulkWrite
	direct   bool
	// directBytes counts the bytes written direct.
	directBytes int64
}

// bulkInflight bounds a bulkWriter's buffers: the one being filled and the
// ones being written. A write's completion wakes its goroutine through the
// runtime's poller, which a program keeping every P busy checks only every
// few milliseconds; with 8 buffers a 1M plan's records goroutine waited 0.33
// s for free ones (an execution trace), and the parsing cores for it.
const bulkInflight = 16

// afterBulkWrite, if set, is called by each direct write's goroutine once
// its write has returned (the tests).
var afterBulkWrite func()

// bulkWrite is one buffer's direct write, made by its own goroutine.
type bulkWrite struct {
	b    []byte
	off  int64
	n    int
	err  error
	done chan struct{}
}

func newBulkWriter(f *os.File, h hash.Hash) *bulkWriter {
	w := &bulkWriter{f: f, h: h, buf: getBulkBuffer()}
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

// spill writes the buffer once it is full and goes on in an empty one: a
// direct write's own goroutine writes it, while fewer than bulkInflight
// buffers are in use a new one is taken, otherwise the oldest write's once
// it is done.
func (w *bulkWriter) spill() error {
	if len(w.buf) < cap(w.buf) {
		return nil
	}
	b := w.buf
	if !w.direct {
		err := w.write(b)
		w.buf = w.buf[:0]
		return err
	}
	if w.h != nil {
		w.h.Write(b)
	}
	wr := &bulkWrite{b: b, off: w.off, done: make(chan struct{})}
	w.off += int64(len(b))
	w.inflight = append(w.inflight, wr)
	go func() {
		wr.n, wr.err = parkedWriteAt(w.f, wr.b, wr.off)
		if afterBulkWrite != nil {
			afterBulkWrite()
		}
		close(wr.done)
	}()
	if len(w.inflight) < bulkInflight {
		w.buf = getBulkBuffer()
		return nil
	}
	oldest := w.inflight[0]
	w.inflight = w.inflight[1:]
	err := w.finish(oldest)
	w.buf = oldest.b[:0]
	return err
}

// finish waits for a direct write in flight (settled).
func (w *bulkWriter) finish(wr *bulkWrite) error {
	<-wr.done
	return w.settled(wr.b, wr.off, wr.n, wr.err)
}

// settled takes the result of the direct write of b at off, n bytes written.
// A file system that accepted the flag and refuses the write (EINVAL) gets
// what is left of it, and every write after it, through the page cache.
func (w *bulkWriter) settled(b []byte, off int64, n int, err error) error {
	w.directBytes += int64(n)
	if err != nil && errors.Is(err, syscall.EINVAL) {
		if w.direct {
			if err := w.buffered(); err != nil {
				return err
			}
		}
		_, err = w.f.WriteAt(b[n:], off+int64(n))
	}
	return err
}

// drain waits for every write in flight and returns the first error.
func (w *bulkWriter) drain() error {
	var first error
	for _, wr := range w.inflight {
		if err := w.finish(wr); first == nil {
			first = err
		}
		putBulkBuffer(wr.b)
	}
	w.inflight = w.inflight[:0]
	return first
}

// write hashes and writes b at the writer's offset, which is aligned, as b
// is in its buffer: direct if b is whole blocks and the file takes it. It
// waits for the write.
func (w *bulkWriter) write(b []byte) error {
	if w.h != nil {
		w.h.Write(b)
	}
	if w.direct && len(b)%bulkAlign != 0 {
		if err := w.buffered(); err != nil {
			return err
		}
	}
	off := w.off
	w.off += int64(len(b))
	if !w.direct {
		_, err := w.f.WriteAt(b, off)
		return err
	}
	n, err := parkedWriteAt(w.f, b, off)
	return w.settled(b, off, n, err)
}

// buffered turns direct I/O off for the rest of the file.
func (w *bulkWriter) buffered() error {
	w.direct = false
	return setDirect(w.f, false)
}

// Flush writes what is buffered (the file's tail), waits for every write
// and gives the buffers back; nothing may be written after it.
func (w *bulkWriter) Flush() error {
	err := w.drain()
	b := w.buf
	if whole := len(b) / bulkAlign * bulkAlign; err == nil && whole > 0 {
		err = w.write(b[:whole])
		b = b[whole:]
	}
	if err == nil && len(b) > 0 {
		err = w.write(b)
	}
	w.release()
	return err
}

// release waits for the writes in flight and gives the buffers back
// (after Flush, or instead of it when the file is given up).
func (w *bulkWriter) release() {
	w.drain()
	if w.buf != nil {
		putBulkBuffer(w.buf)
	}
	w.buf = nil
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
