-- reconcile --allow-running while batches of the job are still in flight:
-- a record with no result line yet may still be answered by its batch, so it
-- goes neither into a retry shard nor into the manual queue. Its disposition
-- is pending; a reconcile once every batch has finished decides it.
UPDATE outcomes
SET disposition = 'pending'
WHERE outcome = 'missing';
