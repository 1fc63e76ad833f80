-- The records to retry (retry_rows.sql), in shard order so that each shard
-- is read in one pass.
SELECT record_id, business_key, custom_id, shard_id, shard_line, attempt, reason, shard_offset, request_sha256
FROM retry_rows
ORDER BY shard_id, shard_line;
