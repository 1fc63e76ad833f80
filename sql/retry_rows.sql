-- The records to retry, each with where its line starts in its shard and its
-- request digest (expected_at, by the record's place in the expected files):
-- the retry reads those lines alone and checks each against its digest.
-- shard_offset is -1 for expected files older than table format 6, whose
-- shards are read whole and checked against their own digest. Stored (a few
-- per cent of the records) before DuckDB's memory limit is lowered for the
-- retry's reads; retry_set.sql streams them in shard order.
SET preserve_insertion_order = false;

CREATE OR REPLACE TEMP TABLE retry_rows AS
SELECT o.record_id, o.business_key, o.custom_id, o.shard_id, o.shard_line, o.attempt, o.reason,
       coalesce(e.shard_offset, -1) AS shard_offset, e.request_sha256
FROM (SELECT record_id, business_key, custom_id, shard_id, shard_line, attempt, reason, pos
      FROM outcomes WHERE disposition = 'retry') o
JOIN (SELECT pos, shard_offset, request_sha256 FROM expected_at) e ON e.pos = o.pos;
