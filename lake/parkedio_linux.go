package lake

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Parked I/O: a read or write of a local file that waits for the disk
// without holding one of the Go runtime's Ps.
//
// A goroutine in a blocking system call keeps its P until the runtime's
// monitor has seen it there at two of its checks, and a busy program's
// monitor checks every 10 ms: a direct read or write of a megabyte (under a
// millisecond) keeps a core from every other goroutine for its whole wait.
// On two cores, plan's shard writes took a tenth of its cores that way (the
// same waits spent parked instead, as in time.Sleep, gave the same speed as
// no writes at all). So these reads and writes go through io_uring: the
// goroutine submits the request and waits on an eventfd through the
// runtime's network poller, parked, while the kernel does the I/O.
//
// Where io_uring is missing (before Linux 5.6, or refused: a container's
// seccomp profile, kernel.io_uring_disabled) the first try says so, and
// every call after it returns done false at once: the caller then makes the
// plain system call.

// io_uring's ABI (include/uapi/linux/io_uring.h).
const (
	uringOpFsync       = 3  // IORING_OP_FSYNC
	uringFsyncDatasync = 1  // IORING_FSYNC_DATASYNC
	uringOpRead        = 22 // IORING_OP_READ
	uringOpWrite       = 23 // IORING_OP_WRITE
	uringOffSQEs       = 0x10000000
	uringFeatSingleMap = 1 << 0 // IORING_FEAT_SINGLE_MMAP
	uringFeatRWCurPos  = 1 << 3 // IORING_FEAT_RW_CUR_POS (5.6, with OP_READ and OP_WRITE)
	uringRegEventfd    = 4      // IORING_REGISTER_EVENTFD
	uringSQESize       = 64
	uringCQESize       = 16
	uringEntries       = 2
)

type uringSQOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type uringCQOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  uringSQOffsets
	cqOff                                                                  uringCQOffsets
}

// uring is one ring with one request in flight at a time.
type uring struct {
	fd     int
	ev     *os.File // the eventfd the kernel signals on each completion; read through the poller
	rings  []byte   // the submission and completion rings (one mapping)
	sqes   []byte
	sqTail *uint32
	sqMask uint32
	cqHead *uint32
	cqTail *uint32
	cqMask uint32
	cqes   unsafe.Pointer
	// inflight is the buffer of the request in flight. Holding it here
	// also makes every caller's buffer escape to the heap, where it cannot
	// move while the kernel reads or writes it (a goroutine's stack can).
	inflight []byte
}

var (
	// rings keeps idle rings for the next caller.
	rings = make(chan *uring, 8)
	// noUring is set once io_uring has failed to start.
	noUring atomic.Bool
	// parkedOps counts the reads and writes done through a ring (tests).
	parkedOps atomic.Int64
)

// getRing returns an idle ring, or a new one; nil where io_uring cannot be used.
func getRing() *uring {
	select {
	case r := <-rings:
		return r
	default:
	}
	if noUring.Load() {
		return nil
	}
	r, err := newRing()
	if err != nil {
		noUring.Store(true)
		return nil
	}
	return r
}

func putRing(r *uring) {
	select {
	case rings <- r:
	default:
		r.close()
	}
}

func newRing() (r *uring, err error) {
	var p uringParams
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uringEntries, uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, errno
	}
	r = &uring{fd: int(fd)}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if p.features&uringFeatSingleMap == 0 || p.features&uringFeatRWCurPos == 0 {
		return nil, errors.New("io_uring without single mmap or read/write opcodes")
	}
	size := max(p.sqOff.array+p.sqEntries*4, p.cqOff.cqes+p.cqEntries*uringCQESize)
	if r.rings, err = unix.Mmap(r.fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return nil, err
	}
	if r.sqes, err = unix.Mmap(r.fd, uringOffSQEs, int(p.sqEntries*uringSQESize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return nil, err
	}
	at := func(off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&r.rings[off])) }
	r.sqTail, r.sqMask = at(p.sqOff.tail), *at(p.sqOff.ringMask)
	r.cqHead, r.cqTail, r.cqMask = at(p.cqOff.head), at(p.cqOff.tail), *at(p.cqOff.ringMask)
	r.cqes = unsafe.Pointer(&r.rings[p.cqOff.cqes])
	for i := range p.sqEntries { // the submission array names each entry by its own index
		*at(p.sqOff.array + 4*i) = i
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	r.ev = os.NewFile(uintptr(efd), "io_uring-eventfd") // non-blocking: read through the poller
	fd32 := int32(efd)
	if _, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), uringRegEventfd, uintptr(unsafe.Pointer(&fd32)), 1, 0, 0); errno != 0 {
		return nil, errno
	}
	return r, nil
}

func (r *uring) close() {
	if r.ev != nil {
		r.ev.Close()
	}
	if r.sqes != nil {
		unix.Munmap(r.sqes)
	}
	if r.rings != nil {
		unix.Munmap(r.rings)
	}
	unix.Close(r.fd)
}

// do submits one read or write of b at off (-1: the file's position, which
// it then advances) on fd, or an fsync (b nil, opFlags its flags), and
// waits, parked, for its result: the count, or the request's error (ioErr).
// ringErr is a failure of the ring itself, which must then not be used
// again.
func (r *uring) do(op uint8, fd int, b []byte, off int64, opFlags uint32) (n int, ioErr, ringErr error) {
	tail := atomic.LoadUint32(r.sqTail)
	sqe := r.sqes[(tail&r.sqMask)*uringSQESize:][:uringSQESize]
	clear(sqe)
	sqe[0] = op
	*(*int32)(unsafe.Pointer(&sqe[4])) = int32(fd)
	*(*uint64)(unsafe.Pointer(&sqe[8])) = uint64(off)
	*(*uint64)(unsafe.Pointer(&sqe[16])) = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	*(*uint32)(unsafe.Pointer(&sqe[24])) = uint32(len(b))
	*(*uint32)(unsafe.Pointer(&sqe[28])) = opFlags
	r.inflight = b
	atomic.StoreUint32(r.sqTail, tail+1)
	for {
		k, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 1, 0, 0, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return 0, nil, fmt.Errorf("io_uring_enter: %w", errno)
		}
		if k == 1 {
			break
		}
	}
	var buf [8]byte
	for {
		head := atomic.LoadUint32(r.cqHead)
		if head != atomic.LoadUint32(r.cqTail) {
			res := *(*int32)(unsafe.Add(r.cqes, uintptr(head&r.cqMask)*uringCQESize+8))
			atomic.StoreUint32(r.cqHead, head+1)
			r.inflight = nil // the kernel is done with it only now
			if res < 0 {
				return 0, syscall.Errno(-res), nil
			}
			return int(res), nil, nil
		}
		if _, err := r.ev.Read(buf[:]); err != nil {
			return 0, nil, fmt.Errorf("io_uring eventfd: %w", err)
		}
	}
}

// parkedIO reads (op uringOpRead) or writes all of b at off (-1: f's
// position) through io_uring, the goroutine parked while the kernel works,
// as f.ReadAt, f.Write or f.WriteAt would: a read stops short only at the
// file's end (io.EOF is the caller's to add). done is false, and nothing is
// done, where io_uring cannot be used.
func parkedIO(f *os.File, op uint8, b []byte, off int64) (n int, done bool, err error) {
	r := getRing()
	if r == nil {
		return 0, false, nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		putRing(r)
		return 0, false, nil
	}
	name := "write"
	if op == uringOpRead {
		name = "read"
	}
	var ringErr error
	retries := 0
	cerr := rc.Control(func(fd uintptr) {
		for n < len(b) {
			at := off
			if off >= 0 {
				at = off + int64(n)
			}
			var k int
			var ioErr error
			k, ioErr, ringErr = r.do(op, int(fd), b[n:n+min(len(b)-n, maxParked)], at, 0)
			if ringErr != nil {
				err = &os.PathError{Op: name, Path: f.Name(), Err: ringErr}
				return
			}
			parkedOps.Add(1)
			if (ioErr == syscall.EINTR || ioErr == syscall.EAGAIN) && retries < 100 {
				retries++
				continue
			}
			if ioErr != nil {
				err = &os.PathError{Op: name, Path: f.Name(), Err: ioErr}
				return
			}
			if k == 0 {
				if op == uringOpWrite {
					err = &os.PathError{Op: name, Path: f.Name(), Err: io.ErrShortWrite}
				}
				return // a read at the file's end
			}
			n, retries = n+k, 0
		}
	})
	if ringErr != nil {
		r.close()
	} else {
		putRing(r)
	}
	if cerr != nil {
		return n, true, cerr
	}
	return n, true, err
}

// maxParked is the most one request reads or writes (its length is 32 bits).
const maxParked = 1 << 30

// parkedDatasync flushes fd's data to stable storage, as fdatasync(2) does,
// waiting parked where io_uring can be used; done is false, and nothing is
// done, where it cannot.
func parkedDatasync(fd int) (done bool, err error) {
	r := getRing()
	if r == nil {
		return false, nil
	}
	_, ioErr, ringErr := r.do(uringOpFsync, fd, nil, 0, uringFsyncDatasync)
	if ringErr != nil {
		r.close()
		return true, ringErr
	}
	putRing(r)
	parkedOps.Add(1)
	return true, ioErr
}
