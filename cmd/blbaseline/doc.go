// Command blbaseline runs the DuckDB-native baseline of the benchmark over an
// OpenAI batch's files: read_ndjson of the input, output and error files into
// Parquet, then the missing and unknown anti-joins and the duplicate
// group-by. It prints one JSON object on stdout: the three counts, the rows
// loaded, the wall time of each step and the DuckDB settings.
//
// With -contract it runs the contract floor instead of the set queries: the
// lake tables batchlake writes (expected, a shard, outcomes, costs, the raw
// files archived), made by DuckDB alone from the same files
// (bench/baseline/contract.sql; bench/README.md says what it leaves out).
//
//	blbaseline -data bench-data -work /tmp/baseline-run1
//	blbaseline -data bench-data -work /tmp/floor-run1 -contract
//
// The work directory receives the Parquet files and DuckDB's spill files; it
// is created if absent and must be empty so that runs do not share state.
// The logic is package github.com/batchlake/batchlake/bench/baseline.
package main
