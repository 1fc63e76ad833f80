// Package layout holds no code, only the test that keeps the import graph
// the way the README's "How the tree is laid out" describes it: the product
// (lake, ingest, reconcile, lifecycle, the provider seam and its adapters)
// never depends on the test and demo machinery under internal/, reconcile
// reads the ledger through lake and never reaches for a provider, and the
// fake provider servers are imported only by tests and the simulator, the
// simulator only by the CLI.
package layout
