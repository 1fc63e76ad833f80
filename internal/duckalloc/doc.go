// Package duckalloc sets how DuckDB's bundled allocator gives memory back
// to the kernel, for the whole process that links it, and reports the
// setting in force and how much freed memory the allocator keeps.
//
// It is a link-time setting, not an option: jemalloc reads it as the
// process loads, before any Go code runs. The batchlake binary imports this
// package, and so do the test binaries that run reconciles, so that they
// allocate as the binary does. Library packages do not import it: a program
// embedding reconcile chooses its own allocator settings.
package duckalloc
