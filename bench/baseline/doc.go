// Package baseline is the DuckDB-native baseline of the benchmark (bench/README.md):
// what DuckDB alone does with an OpenAI batch's input, output and error
// files. It reads each file with read_ndjson (explicit columns, invalid lines
// skipped), copies it into Parquet, and runs the three set queries a
// reconciler cannot do without: records with no result line (an anti-join),
// result ids that were never sent (an anti-join) and records with more than
// one result line (a group-by). It computes no record ids, hashes nothing and
// keeps no lake, so it is a floor for batchlake's plan + ingest + reconcile,
// not an equivalent.
//
// Options.Contract runs the contract floor (contract.sql) instead of the set
// queries: the lake tables batchlake must write, made by DuckDB alone, so
// that batchlake can also be compared with DuckDB doing the same work.
//
// DuckDB runs embedded, with threads, memory_limit and temp_directory set and
// extension autoinstall and autoload off (no network access at run time).
package baseline
