package duckalloc

// DuckDB's Linux x86-64 builds allocate its buffers through a jemalloc of
// their own (symbols prefixed duckdb_je_), configured to give freed pages back
// to the kernel after one second. A reconcile, report or query over more than
// --memory-limit spills, freeing and allocating buffers all along: each page
// given back is an madvise with a TLB shootdown and each one taken again a
// page fault, both dear on a virtual machine. Kept three seconds, the pages
// are reused instead: at 1M and 10M records reconcile takes about a tenth
// less cpu time than at one second. Ten seconds was no faster, and held up
// to 200 MiB more at a 10M reconcile's peak, near a 1 GiB pod's limit
// (docs/performance.md).
//
// jemalloc reads its settings before Go starts, so they are set here, in C:
// jemalloc's last source of settings is the weak symbol
// duckdb_je_malloc_conf_2_conf_harder, defined below. A constructor that
// runs before jemalloc's leaves it empty when DUCKDB_JE_MALLOC_CONF (the
// environment's settings) is set, so that a user's own settings win. Where
// DuckDB has no jemalloc (other platforms, or a build against a shared
// libduckdb), the symbol is an unused string and Settings says so.

/*
#include <stdlib.h>
#include <stdint.h>
#include <sys/types.h>

const char *duckdb_je_malloc_conf_2_conf_harder = "dirty_decay_ms:3000,muzzy_decay_ms:0";

__attribute__((constructor(101))) static void batchlake_allocator_settings(void) {
	if (getenv("DUCKDB_JE_MALLOC_CONF") != NULL) {
		duckdb_je_malloc_conf_2_conf_harder = NULL;
	}
}

extern int duckdb_je_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen) __attribute__((weak));

static int batchlake_decay(const char *name, long long *ms) {
	if (duckdb_je_mallctl == NULL) {
		return -1;
	}
	ssize_t v;
	size_t n = sizeof(v);
	if (duckdb_je_mallctl(name, &v, &n, NULL, 0) != 0) {
		return -1;
	}
	*ms = (long long)v;
	return 0;
}

// batchlake_dirty reads how many bytes of freed pages all of jemalloc's
// arenas keep for reuse (stats.arenas.<all>.pdirty pages of arenas.page
// bytes; 4096 is jemalloc's MALLCTL_ARENAS_ALL), after refreshing the
// statistics (epoch).
static int batchlake_dirty(long long *bytes) {
	if (duckdb_je_mallctl == NULL) {
		return -1;
	}
	uint64_t epoch = 1;
	size_t n = sizeof(epoch);
	if (duckdb_je_mallctl("epoch", &epoch, &n, &epoch, sizeof(epoch)) != 0) {
		return -1;
	}
	size_t pages, page;
	n = sizeof(pages);
	if (duckdb_je_mallctl("stats.arenas.4096.pdirty", &pages, &n, NULL, 0) != 0) {
		return -1;
	}
	n = sizeof(page);
	if (duckdb_je_mallctl("arenas.page", &page, &n, NULL, 0) != 0) {
		return -1;
	}
	*bytes = (long long)(pages * page);
	return 0;
}
*/
import "C"

import "unsafe"

// The decay times set above, in milliseconds, for the checks that read them
// back.
const (
	DirtyDecayMS = 3000
	MuzzyDecayMS = 0
)

// Settings reports DuckDB's jemalloc decay times in milliseconds (dirty
// then muzzy; -1 is never), or ok false when DuckDB allocates without its
// jemalloc.
func Settings() (dirtyMS, muzzyMS int64, ok bool) {
	read := func(name string) (int64, bool) {
		cs := C.CString(name)
		defer C.free(unsafe.Pointer(cs))
		var v C.longlong
		if C.batchlake_decay(cs, &v) != 0 {
			return 0, false
		}
		return int64(v), true
	}
	d, ok1 := read("opt.dirty_decay_ms")
	m, ok2 := read("opt.muzzy_decay_ms")
	return d, m, ok1 && ok2
}

// DirtyBytes reports how many bytes of freed pages DuckDB's jemalloc keeps
// for its own reuse (not yet given back to the kernel), or ok false when
// DuckDB allocates without its jemalloc or without its statistics.
func DirtyBytes() (bytes int64, ok bool) {
	var v C.longlong
	if C.batchlake_dirty(&v) != 0 {
		return 0, false
	}
	return int64(v), true
}
