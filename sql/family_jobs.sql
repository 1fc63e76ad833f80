-- A job and its retry descendants (manifests whose parent_job_key is the job,
-- recursively), oldest generation first.
WITH RECURSIVE fam(job_key) AS (
    SELECT CAST(? AS VARCHAR)
    UNION
    SELECT m.job_key FROM manifests m JOIN fam f ON m.parent_job_key = f.job_key
)
SELECT m.job_key, m.attempt
FROM manifests m
WHERE m.job_key IN (SELECT job_key FROM fam)
ORDER BY m.attempt, m.job_key;
