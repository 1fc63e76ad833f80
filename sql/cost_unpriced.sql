-- The lines the cost command sums at 0 because the price table of their
-- reconcile had no row for their model (costs written before the unpriced
-- column existed say nothing); filters are bound parameters as in cost_by.sql.
SELECT provider, model_version, count(*) AS lines
FROM costs
WHERE coalesce(unpriced, false)
  AND (CAST(? AS VARCHAR) = '' OR job_key = ?)
  AND (CAST(? AS VARCHAR) = '' OR tenant = ?)
GROUP BY ALL
ORDER BY provider, model_version;
