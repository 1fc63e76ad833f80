package lake

import (
	"os"

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
