-- The manual queue, for one job and its retry descendants (or everything when
-- the job is ''), and one tenant (or all): ? job, job, tenant, tenant.
WITH RECURSIVE fam(job_key) AS (
    SELECT CAST(? AS VARCHAR)
    UNION
    SELECT m.job_key FROM manifests m JOIN fam f ON m.parent_job_key = f.job_key
)
SELECT record_id, tenant, business_key, outcome, reason, attempts, last_job_key, CAST(cost_usd AS VARCHAR) AS cost_usd
FROM manual
WHERE (CAST(? AS VARCHAR) = '' OR last_job_key IN (SELECT job_key FROM fam))
  AND (CAST(? AS VARCHAR) = '' OR tenant = ?)
ORDER BY tenant, business_key, record_id;
