-- Where the lines of the records to retry (retry_rows.sql) start, shard by
-- shard: read ahead while the tables are written (expected rows of table
-- format 6 on say; older ones are read whole later).
SELECT shard_id, shard_offset
FROM retry_rows
WHERE shard_offset >= 0
ORDER BY shard_id, shard_offset;
