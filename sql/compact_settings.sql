-- The settings of a compaction and of verify's check of one
-- (reconcile/compact.go). Their statements read each of thousands of table
-- files once, and the order of a compaction's rows means nothing (a view's
-- rows have none): kept in order, DuckDB holds the files it read ahead of the
-- writer, and it would keep their bytes and footers in its caches for reads
-- that never come. Without them a first compaction of 1,616 jobs took
-- 4.8-5.8 s instead of 16.2-20.3 s, and peaked at about half the memory.
SET preserve_insertion_order = false;
SET enable_external_file_cache = false;
SET parquet_metadata_cache = false;
