// Package reconcile runs batchlake's set algebra in embedded DuckDB over the
// lake's Parquet tables: it classifies every expected record (succeeded,
// quality_failed, failed_retryable, failed_permanent, missing), finds unknown
// and duplicate ids, prices every result line, writes the report, the retry
// shards with their lineage, and the outcomes and costs tables. It also serves
// the lake's views to the sql and catalog commands.
//
// Past one machine, RunPartition reconciles one partition of a job's records
// (by record_id, lake.Partition) and Merge combines the partitions into
// exactly what Run writes (partition.go, docs/engines.md).
//
// This is the only package that links DuckDB. DuckDB reads local files only:
// a remote lake's table files are staged into a local cache keyed by content
// digest first (a cache entry of an immutable object never goes stale).
package reconcile
