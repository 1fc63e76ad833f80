-- Cost of a job family's result lines by {{.Dim}}, exact.
WITH RECURSIVE fam(job_key) AS (
    SELECT CAST(? AS VARCHAR)
    UNION
    SELECT m.job_key FROM manifests m JOIN fam f ON m.parent_job_key = f.job_key
)
SELECT {{.Dim}} AS k, count(*) AS lines, CAST(sum(cost_usd) AS VARCHAR) AS cost_usd
FROM costs
WHERE job_key IN (SELECT job_key FROM fam)
GROUP BY {{.Dim}}
ORDER BY {{.Dim}};
