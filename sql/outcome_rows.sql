-- Rows of the outcomes table, with each record's cost in this job.
SELECT job_key, tenant, record_id, business_key, shard_id, custom_id, attempt,
       parent_job_key, outcome, disposition, reason, lines,
       CAST(cost_usd AS VARCHAR) AS cost_usd
FROM outcomes
ORDER BY record_id;
