-- The records to retry, in shard order so shards can be read in one pass,
-- each with where its line starts in its shard and its request digest
-- (expected_at, by the record's place in the expected files): the retry
-- reads those lines alone and checks each against its digest. shard_offset
-- is -1 for expected files older than table format 6, whose shards are read
-- whole and checked against their own digest.
SELECT o.record_id, o.business_key, o.custom_id, o.shard_id, o.shard_line, o.attempt, o.reason,
       coalesce(e.shard_offset, -1) AS shard_offset, e.request_sha256
FROM outcomes o
JOIN expected_at e ON e.pos = o.pos
WHERE o.disposition = 'retry'
ORDER BY o.shard_id, o.shard_line;
