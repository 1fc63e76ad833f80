// Package hugepages backs the process's large anonymous memory with
// transparent huge pages where the kernel leaves them to the program
// (/sys/kernel/mm/transparent_hugepage/enabled set to madvise, the default
// of most distributions).
//
// Every page of fresh memory costs a page fault on its first touch, and on a
// virtual machine that hands the pages a process frees back to its host (free
// page reporting) a fault of a 4 KiB page costs about 11 µs: a 1M plan, ingest and reconcile take 70,000, 90,000 and
// 150,000 of them. A 2 MiB page is one fault instead of 512, and the three
// steps take 14-22 % less time (docs/performance.md). The Go heap and
// DuckDB's allocator (jemalloc, built without huge page support) both map
// their memory with mmap, which in a cgo binary is the C library's: the
// binary's own mmap, defined here, makes the call and advises MADV_HUGEPAGE
// on each private, writable, anonymous mapping of at least one huge page.
// Thread stacks (MAP_STACK), reservations (PROT_NONE), shared and file
// mappings are left as they are.
//
// BATCHLAKE_HUGEPAGES=0 in the environment turns the advice off (read once,
// before Go starts). A command that waits for hours between its steps
// (batchlake run) turns it off with Disable as it starts: the kernel's
// khugepaged makes whole huge pages again of advised memory the Go runtime
// has given back, so such a process would keep its high-water mark while it
// waits. Where the kernel's setting is always or never the advice changes
// nothing. Other platforms build a stub that reports the advice off.
package hugepages
