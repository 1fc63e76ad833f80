package lake

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Flushing behind the writes, and markers after them.
//
// A local lake's marker or ledger event is fsynced as it is written
// (createOnce); the files it names must reach the disk before it does, or a
// crash of the machine could leave a marker naming a file whose bytes were
// still in the page cache (ext4 allocates a file's blocks only as it writes
// it back, so the marker's own fsync does not write them). Every file stored
// without an fsync of its own (linked or copied into place) is queued here
// for an fdatasync as soon as it is complete, and a marker waits for the
// flushes queued before it (waitFlushed).
//
// Done in the background, the flushes cost a step little: a file written
// past the page cache (bulkWriter, copyMapped) is queued as soon as its last
// write returns, and while the command goes on the disk, or a virtual
// machine's host, empties the volatile cache that holds it; before, the
// marker's fsync waited for that flush at the end of the step (a 1M ingest's
// 0.38–0.45 s for its 775 MB archive, both cores idle). Where the file system
// took no direct I/O, the flush writes the file's pages from the cache.
//
// One goroutine flushes the files in the order they were queued, each
// through a descriptor of its own (the caller closes the file at once),
// waiting parked where io_uring can be used.

var (
	// flushQueue holds duplicated descriptors of the files to flush.
	flushQueue     chan queuedFlush
	flushQueueOnce sync.Once
	// flushMu guards the counts of flushes queued and done, and flushDone
	// signals each one done (waitFlushed).
	flushMu                sync.Mutex
	flushDone              = sync.NewCond(&flushMu)
	flushQueuedN, flushedN int64
	// flushErr is the first flush that failed, or could not be queued:
	// every marker after it fails with it, for the files it names may not
	// be on the disk.
	flushErr error
	// flushPending holds the files (device and inode) queued and not yet
	// flushed: an object is complete when it is queued, so a second request
	// meanwhile (a bulk object is queued as it is closed, and again as it
	// is linked) is the same flush. The queued descriptor keeps the inode
	// from being reused until its flush is done.
	flushPending = map[[2]uint64]bool{}
	// afterFlushBehind, if set, is called with each flush's result once it
	// has returned (the tests).
	afterFlushBehind func(error)
)

// flushBehind queues f's data for a flush to stable storage in the
// background.
func flushBehind(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		flushFailed(f.Name(), err)
		return
	}
	dup := -1
	var derr error
	if err := rc.Control(func(fd uintptr) { dup, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil || derr != nil {
		flushFailed(f.Name(), errors.Join(err, derr))
		return
	}
	var st unix.Stat_t
	if err := unix.Fstat(dup, &st); err != nil {
		unix.Close(dup)
		flushFailed(f.Name(), err)
		return
	}
	id := [2]uint64{uint64(st.Dev), st.Ino}
	flushQueueOnce.Do(func() {
		flushQueue = make(chan queuedFlush, 256)
		go flushLoop(flushQueue)
	})
	flushMu.Lock()
	if flushPending[id] {
		flushMu.Unlock()
		unix.Close(dup)
		return
	}
	flushPending[id] = true
	flushQueuedN++
	flushMu.Unlock()
	flushQueue <- queuedFlush{dup, id, f.Name()}
}

// flushBehindPath is flushBehind of the file at path.
func flushBehindPath(path string) {
	f, err := os.Open(path)
	if err != nil {
		flushFailed(path, err)
		return
	}
	flushBehind(f)
	f.Close()
}

// flushFailed keeps the first failure of a flush.
func flushFailed(name string, err error) {
	flushMu.Lock()
	defer flushMu.Unlock()
	if flushErr == nil {
		flushErr = fmt.Errorf("flush %s to the disk: %w", name, err)
	}
}

// waitFlushed returns once every flush queued before it was called is done,
// with the first flush's failure if one failed.
func waitFlushed() error {
	flushMu.Lock()
	defer flushMu.Unlock()
	for want := flushQueuedN; flushedN < want; {
		flushDone.Wait()
	}
	return flushErr
}

// queuedFlush is a file to flush: a descriptor of its own, its device and
// inode, and its name for an error.
type queuedFlush struct {
	fd   int
	id   [2]uint64
	name string
}

func flushLoop(q <-chan queuedFlush) {
	for f := range q {
		done, err := parkedDatasync(f.fd)
		if !done {
			err = unix.Fdatasync(f.fd)
		}
		if afterFlushBehind != nil {
			afterFlushBehind(err)
		}
		if err != nil {
			flushFailed(f.name, err)
		}
		flushMu.Lock()
		delete(flushPending, f.id)
		unix.Close(f.fd)
		flushedN++
		flushDone.Broadcast()
		flushMu.Unlock()
	}
}

// writeBehind writes to a file and starts the kernel's writeback of every
// writeBehindChunk bytes written (sync_file_range, which does not wait for
// it), so that the file's flush once it is complete (flushBehind) waits for
// little: a 1M plan's markers waited 84-89 ms for the flushes of its expected
// table's files written through the page cache, 24-33 ms with this
// (docs/performance.md).
type writeBehind struct {
	f            *os.File
	off, started int64
}

const writeBehindChunk = 4 << 20

// afterWriteBehind, if set, is called with each range whose writeback was
// started and the call's result (the tests).
var afterWriteBehind func(start, n int64, err error)

func newWriteBehind(f *os.File) io.Writer { return &writeBehind{f: f} }

func (w *writeBehind) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.off += int64(n)
	if w.off-w.started >= writeBehindChunk {
		start, size := w.started, w.off-w.started
		w.started = w.off
		rc, serr := w.f.SyscallConn()
		if serr == nil {
			// Best effort: the flush before the marker is what makes the
			// file durable.
			cerr := rc.Control(func(fd uintptr) { serr = unix.SyncFileRange(int(fd), start, size, unix.SYNC_FILE_RANGE_WRITE) })
			serr = errors.Join(cerr, serr)
		}
		if afterWriteBehind != nil {
			afterWriteBehind(start, size, serr)
		}
	}
	return n, err
}
