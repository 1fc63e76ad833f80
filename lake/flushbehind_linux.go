package lake

import (
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Flushing behind the writes.
//
// A file written past the page cache (bulkWriter, copyMapped) is handed to
// the disk as its writes return, but the disk, or a virtual machine's host,
// may keep it in a volatile cache until a flush is asked for. The next
// commit marker is fsynced (createOnce), and that flush then waits for every
// byte written before it: a 1M ingest's marker waited 0.38–0.45 s for its
// 775 MB archive, both cores idle. flushBehind asks for the flush of a
// file as soon as it is complete, while the command goes on, so that the
// marker's own finds little left to do. It promises nothing: the marker's
// fsync is still what makes a commit durable. Where the file system took no
// direct I/O, the flush writes the file's pages from the cache, as the
// kernel's writeback would within half a minute.
//
// One goroutine flushes the files in the order they were completed, each
// through a descriptor of its own (the caller closes the file at once),
// waiting parked where io_uring can be used; a file that finds the queue
// full is left to the marker's flush.

var (
	// flushQueue holds duplicated descriptors of the files to flush.
	flushQueue     chan int
	flushQueueOnce sync.Once
	// flushesQueued counts the files queued (the tests).
	flushesQueued atomic.Int64
	// afterFlushBehind, if set, is called with each flush's result once it
	// has returned (the tests).
	afterFlushBehind func(error)
)

// flushBehind queues f's data for a flush to stable storage in the
// background.
func flushBehind(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	dup := -1
	if rc.Control(func(fd uintptr) { dup, _ = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }) != nil || dup < 0 {
		return
	}
	flushQueueOnce.Do(func() {
		flushQueue = make(chan int, 256)
		go flushLoop(flushQueue)
	})
	select {
	case flushQueue <- dup:
		flushesQueued.Add(1)
	default:
		unix.Close(dup)
	}
}

func flushLoop(q <-chan int) {
	for fd := range q {
		done, err := parkedDatasync(fd)
		if !done {
			err = unix.Fdatasync(fd)
		}
		unix.Close(fd)
		if afterFlushBehind != nil {
			afterFlushBehind(err)
		}
	}
}
