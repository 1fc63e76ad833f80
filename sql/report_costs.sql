-- Cost of the report's priced lines by {{.Dim}} (a fixed expression chosen by
-- the Go side: category, model family, attempt, tenant or the day the line's
-- file was ingested), exact; the groups add up to the cost table's total.
WITH RECURSIVE {{.Scope}}
SELECT {{.Dim}} AS k, count(*) AS lines, CAST(sum(cost_usd) AS VARCHAR) AS cost_usd
FROM costs
WHERE job_key IN (SELECT job_key FROM scope)
GROUP BY k
ORDER BY k;
