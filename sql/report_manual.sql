-- The manual queue of the report's records: records whose last job is in the
-- scope, first rows only ($limit).
WITH RECURSIVE {{.Scope}}
SELECT record_id, tenant, business_key, outcome, reason, attempts, last_job_key, CAST(cost_usd AS VARCHAR) AS cost_usd
FROM manual
WHERE last_job_key IN (SELECT job_key FROM scope)
ORDER BY tenant, business_key, record_id
LIMIT $limit;
