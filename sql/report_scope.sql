-- The jobs a report covers: the CTE scope(job_key) that every report_*.sql
-- file starts with (after WITH RECURSIVE). Either the job $job and its
-- retry descendants (manifests whose parent_job_key is in the family,
-- recursively), or, when $job is '', every job of $tenant ('' for every
-- tenant) planned at or after $since (a UTC time with its offset, '' for any
-- time): when $since is '', exactly the lines `cost --tenant` sums.
scope(job_key) AS (
    SELECT job_key FROM manifests
    WHERE job_key = CAST($job AS VARCHAR)
       OR (CAST($job AS VARCHAR) = ''
           AND (CAST($tenant AS VARCHAR) = '' OR tenant = CAST($tenant AS VARCHAR))
           AND (CAST($since AS VARCHAR) = '' OR created_at >= CAST(nullif(CAST($since AS VARCHAR), '') AS TIMESTAMPTZ)))
    UNION
    SELECT m.job_key FROM manifests m JOIN scope s ON m.parent_job_key = s.job_key
    WHERE CAST($job AS VARCHAR) <> ''
)
