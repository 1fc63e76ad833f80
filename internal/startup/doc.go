// Package startup holds the Go collector off while the binary's packages
// initialise, for a command that starts in fewer milliseconds.
//
// The cloud SDKs, the provider SDKs and the JSON Schema compiler allocate
// in their package init functions until the heap is about 7 MB, past the
// collector's first goal of 4 MB, so every batchlake process ran two
// collections before main: batchlake --version took 53 ms and about 1,270
// page faults with them, 42-44 ms and 810-1,000 without (on a 2-core
// virtual machine, docs/performance.md). Importing this package turns
// the collector off (debug.SetGCPercent(-1)) as soon as the init order
// reaches it; Done, the first thing main does, puts back the setting the
// process started with (GOGC's, 100 by default). When GOGC is set in the
// environment the package changes nothing: the user's setting holds from
// the first allocation.
//
// A binary that imports it must call Done before its work: until then
// nothing is collected.
package startup
