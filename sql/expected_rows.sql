-- Rows .Lo <= row < .Hi of one expected file (.Path: a list of the empty
-- file that fixes the schema and the file), in the file's order, which a
-- filtered scan keeps (preserve insertion order; the Go side checks every
-- row's number and id_hash, outcome_rows.sql's hash of custom_id): the columns
-- of the outcomes table that come from the record itself. DuckDB reads only
-- the row groups of the range.
SELECT file_row_number, CAST(hash(custom_id) >> 1 AS BIGINT) AS id_hash, record_id, business_key, shard_id, custom_id, attempt, parent_job_key
FROM read_parquet({{.Path}}, union_by_name = true, file_row_number = true)
WHERE file_row_number >= {{.Lo}} AND file_row_number < {{.Hi}};
