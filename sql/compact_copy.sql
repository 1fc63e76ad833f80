-- One view source of a compaction (reconcile/compact.go): the rows of the
-- given files, as the views read them, in one Parquet file.
COPY (SELECT * FROM read_parquet({{.Files}}, union_by_name = true)) TO {{.Out}} (FORMAT parquet, COMPRESSION zstd);
