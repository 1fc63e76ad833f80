-- The records to retry, each with its record id, business key, its shard, where its
-- line starts there and its request digest (expected_at, by the record's
-- place in the expected files):
-- the retry reads those lines alone and checks each against its digest.
-- shard_offset is -1 for expected files older than table format 6, whose
-- shards are read whole and checked against their own digest. Stored (a few
-- per cent of the records) before DuckDB's memory limit is lowered for the
-- retry's reads, and before the outcomes and costs tables are written, so
-- that the retry's lines are read while they are (retry_offsets.sql);
-- retry_set.sql streams them in shard order.
SET preserve_insertion_order = false;

CREATE OR REPLACE TEMP TABLE retry_rows AS
SELECT e.record_id, e.business_key, o.custom_id, e.shard_id, e.shard_line, o.attempt, o.reason,
       coalesce(e.shard_offset, -1) AS shard_offset, e.request_sha256
FROM (SELECT custom_id, attempt, reason, pos FROM outcomes WHERE disposition = 'retry') o
JOIN (SELECT pos, record_id, business_key, shard_id, shard_line, shard_offset, request_sha256 FROM expected_at) e ON e.pos = o.pos;
