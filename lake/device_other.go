//go:build !unix

package lake

// sameDevice cannot tell here: ok is false.
func sameDevice(a, b string) (same, ok bool) { return false, false }
