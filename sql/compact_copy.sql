-- One view source of a compaction (reconcile/compact.go): the rows the views
-- read for it (the jobs read live, and the previous compaction's rows of the
-- jobs unchanged since), in one Parquet file; or a part of them, a batch of
-- the jobs' table files, that the compaction reads again.
COPY ({{.Query}}) TO {{.Out}} (FORMAT parquet, COMPRESSION zstd);
