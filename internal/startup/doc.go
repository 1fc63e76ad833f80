// Package startup holds the Go collector off while the binary's packages
// initialise, for a command that starts in fewer milliseconds.
//
// The cloud SDKs, the provider SDKs and the JSON Schema compiler allocate
// about 7 MB in their package init functions, past the collector's first
// 4 MB goal, so every batchlake process ran two collections before main:
// each a mark of a young heap, and on a virtual machine hundreds of page
// faults for the collector's own structures. Importing this package turns
// the collector off (debug.SetGCPercent(-1)) as soon as the init order
// reaches it; Done, the first thing main does, puts back the setting the
// process started with (GOGC's, 100 by default). When GOGC is set in the
// environment the package changes nothing: the user's setting holds from
// the first allocation.
//
// A binary that imports it must call Done before its work: until then
// nothing is collected.
package startup
