-- Cost of the report's priced lines by each of six dimensions (D0 to D4,
-- fixed expressions chosen by the Go side, the cost command's groupings:
-- category, model family, attempt, tenant, provider and model; and the day
-- the line's file was ingested), exact; each dimension's groups add up to
-- the cost table's total. One scan of the costs, a grouping set per
-- dimension (a query per dimension read the lines six times, about a quarter
-- of a 1M job's report). dim says which dimension a row groups by (grouping()
-- tells a set's own column from the NULL the other sets give it).
WITH RECURSIVE {{.Scope}},
dims AS (
    SELECT {{.D0}} AS d0, {{.D1}} AS d1, {{.D2}} AS d2, {{.D3}} AS d3, {{.D4}} AS d4,
           -- The day in UTC, whatever the session's time zone: days since
           -- 1970, named below once per group (a line's time formatted in UTC
           -- cost as much as the other five groupings together).
           epoch_us(ingested_at) // 86400000000 AS d5,
           cost_usd
    FROM costs
    WHERE job_key IN (SELECT job_key FROM scope)
)
SELECT CASE WHEN grouping(d0) = 0 THEN 0 WHEN grouping(d1) = 0 THEN 1 WHEN grouping(d2) = 0 THEN 2
            WHEN grouping(d3) = 0 THEN 3 WHEN grouping(d4) = 0 THEN 4 ELSE 5 END AS dim,
       CASE WHEN grouping(d0) = 0 THEN d0 WHEN grouping(d1) = 0 THEN d1 WHEN grouping(d2) = 0 THEN d2
            WHEN grouping(d3) = 0 THEN d3 WHEN grouping(d4) = 0 THEN d4
            ELSE coalesce(CAST(DATE '1970-01-01' + CAST(d5 AS INTEGER) AS VARCHAR), 'not ingested') END AS k,
       count(*) AS lines, CAST(sum(cost_usd) AS VARCHAR) AS cost_usd
FROM dims
GROUP BY GROUPING SETS ((d0), (d1), (d2), (d3), (d4), (d5))
ORDER BY dim, k;
