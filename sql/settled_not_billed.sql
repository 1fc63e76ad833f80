-- Per job, the records its report counted as committed but not billed (no
-- result line in any channel: outcome missing) that a later attempt of the
-- same record has answered: that attempt's line is billed in its own job, so
-- the earlier request is no longer spend to come. Each job's outcomes are
-- those of its latest report; the estimate is plan's, per record.
SELECT o.job_key,
       count(*) AS records,
       coalesce(sum(e.est_input_tokens), 0)::BIGINT AS input_tokens,
       coalesce(sum(e.est_output_tokens), 0)::BIGINT AS output_tokens
FROM outcomes o
JOIN expected e ON e.job_key = o.job_key AND e.record_id = o.record_id
WHERE o.outcome = 'missing'
  AND EXISTS (SELECT 1 FROM outcomes l
              WHERE l.record_id = o.record_id AND l.attempt > o.attempt AND l.outcome <> 'missing')
GROUP BY o.job_key;
