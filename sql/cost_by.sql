-- Cost attribution grouped by the chosen dimensions (validated against a fixed
-- list by the Go side); filters are bound parameters.
SELECT {{.Select}}
       count(*) AS lines,
       count(DISTINCT record_id) FILTER (WHERE record_id <> '') AS records,
       sum(cost_usd) AS cost_usd
FROM costs
WHERE (CAST(? AS VARCHAR) = '' OR job_key = ?)
  AND (CAST(? AS VARCHAR) = '' OR tenant = ?)
{{.GroupBy}}
ORDER BY {{.OrderBy}};
