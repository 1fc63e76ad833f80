-- Keep each Parquet file's footer once read: a reconcile scans a job's table
-- files in several statements, and a job collected in many result files has
-- a hundred of them or more. The lake's table files are written once, under
-- their content's digest, so a footer read stays true.
SET parquet_metadata_cache = true;
