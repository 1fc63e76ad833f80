//go:build unix

package lake

import (
	"os"
	"syscall"
)

// sameDevice reports whether the files or folders a and b are on one file
// system (one device), so that one can be linked beside the other; ok is
// false when either cannot be looked at.
func sameDevice(a, b string) (same, ok bool) {
	fa, err := os.Stat(a)
	if err != nil {
		return false, false
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false, false
	}
	sa, ok1 := fa.Sys().(*syscall.Stat_t)
	sb, ok2 := fb.Sys().(*syscall.Stat_t)
	if !ok1 || !ok2 {
		return false, false
	}
	return sa.Dev == sb.Dev, true
}
