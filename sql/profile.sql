-- BATCHLAKE_SQL_PROFILE: DuckDB's profile (the operator tree with each
-- operator's time and rows) of the next statement, written to .Path.
SET enable_profiling = 'query_tree';
SET profiling_output = {{.Path}};
