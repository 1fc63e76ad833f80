//go:build linux && cgo && (amd64 || arm64)

package hugepages

/*
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BATCHLAKE_HUGE_PAGE (2u << 20)

static int batchlake_huge_on = 1;

// Runs before Go's runtime and DuckDB's static initialisers, which map
// memory as they start.
__attribute__((constructor(101))) static void batchlake_huge_settings(void) {
	const char *v = getenv("BATCHLAKE_HUGEPAGES");
	if (v != NULL && (strcmp(v, "0") == 0 || strcmp(v, "off") == 0 || strcmp(v, "false") == 0)) {
		batchlake_huge_on = 0;
	}
}

static int batchlake_huge_wanted(size_t len, int prot, int flags) {
	return __atomic_load_n(&batchlake_huge_on, __ATOMIC_RELAXED) && len >= BATCHLAKE_HUGE_PAGE &&
		(flags & MAP_ANONYMOUS) && (flags & MAP_PRIVATE) &&
		!(flags & (MAP_STACK | MAP_HUGETLB | MAP_SHARED)) && (prot & PROT_WRITE);
}

// mmap replaces the C library's for the whole binary: the Go runtime's
// (runtime/cgo's x_cgo_mmap), DuckDB's and jemalloc's calls all land here.
// It keeps mmap's contract (MAP_FAILED and errno on failure); the advice is
// best effort, its failure ignored.
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
	long r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	if (r == -1) {
		return MAP_FAILED;
	}
	if (batchlake_huge_wanted(len, prot, flags)) {
		madvise((void *)r, len, MADV_HUGEPAGE);
	}
	return (void *)r;
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) __attribute__((alias("mmap")));

static int batchlake_huge_enabled(void) { return __atomic_load_n(&batchlake_huge_on, __ATOMIC_RELAXED); }
static void batchlake_huge_disable(void) { __atomic_store_n(&batchlake_huge_on, 0, __ATOMIC_RELAXED); }

// For the tests, which cannot use cgo: a mapping made through the mmap above.
static uintptr_t batchlake_huge_map(size_t len, int prot, int flags, int *err) {
	void *p = mmap(NULL, len, prot, flags, -1, 0);
	*err = p == MAP_FAILED ? errno : 0;
	return p == MAP_FAILED ? 0 : (uintptr_t)p;
}
*/
import "C"

import "syscall"

// Enabled reports whether mappings are advised (BATCHLAKE_HUGEPAGES is not
// 0, off or false).
func Enabled() bool { return C.batchlake_huge_enabled() != 0 }

// Disable stops the advice for the mappings made from now on (those already
// advised keep it): for a process that, once its work is done, waits for
// hours, where the kernel's khugepaged would make whole huge pages again of
// the memory the Go runtime gives back, up to the heap's high-water mark.
func Disable() { C.batchlake_huge_disable() }

// mapAnon maps n bytes as mmap(NULL, n, prot, flags, -1, 0) through the
// binary's mmap, for the tests.
func mapAnon(n uintptr, prot, flags int) (uintptr, error) {
	var e C.int
	p := C.batchlake_huge_map(C.size_t(n), C.int(prot), C.int(flags), &e)
	if e != 0 {
		return 0, syscall.Errno(e)
	}
	return uintptr(p), nil
}
