package ingest

import "unsafe"

// prefault writes zeros over all of b's capacity, which must hold zeros
// only (a fresh make). The collector's write barrier reads each pointer slot
// before it is written while a collection is marking, and a fresh buffer's
// first read maps the kernel's shared zero page: its first write then takes
// a copy-on-write fault and a TLB shootdown on every core the process runs on,
// several times the cost of the plain fault of a first write. The zeros are
// written as bytes, past the barrier: a nil pointer over a nil pointer hides
// nothing from the collector.
func prefault[T any](b []T) []T {
	if c := b[:cap(b)]; len(c) > 0 {
		clear(unsafe.Slice((*byte)(unsafe.Pointer(&c[0])), uintptr(len(c))*unsafe.Sizeof(c[0])))
	}
	return b
}
