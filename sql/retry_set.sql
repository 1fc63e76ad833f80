-- The records to retry, in shard order so shards can be streamed once.
SELECT record_id, business_key, custom_id, shard_id, shard_line, attempt, reason
FROM outcomes
WHERE disposition = 'retry'
ORDER BY shard_id, shard_line;
