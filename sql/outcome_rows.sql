-- Rows of the outcomes table, with each record's cost in this job.
SELECT o.job_key, o.tenant, o.record_id, o.business_key, o.shard_id, o.custom_id, o.attempt,
       o.parent_job_key, o.outcome, o.disposition, o.reason, o.lines,
       CAST(coalesce(c.cost, 0) AS VARCHAR) AS cost_usd
FROM outcomes o
LEFT JOIN (SELECT record_id, sum(cost_usd) AS cost FROM line_costs WHERE record_id IS NOT NULL GROUP BY record_id) c
  ON c.record_id = o.record_id
ORDER BY o.record_id;
