-- Retry policy beyond --max-attempts, run after reconcile.sql and outcomes.sql
-- and before the report's counts, only with a cap: per-record cumulative token
-- and cost caps. Reads lines (reconcile.sql), outcomes (outcomes.sql),
-- prior_costs and prior_attempts (policy_sources.sql). The manual cost
-- category follows from the outcomes' dispositions (line_costs.sql, run right
-- after).
{{if .Caps}}
-- Each record's usage over every attempt so far: this job's lines as priced
-- here, plus its ancestors' lines as their latest reconcile priced them (the
-- costs table) with the tokens of the attempt row each priced line names.
-- Tokens are input_tokens + output_tokens (input counts cached and cache-write
-- tokens, output counts reasoning tokens).
-- A record is its place in the expected files (pos): the outcomes table
-- keeps no record_id. An ancestor's line of no record (record_id '') joins
-- no expected row.
CREATE OR REPLACE TEMP TABLE record_usage AS
SELECT pos, sum(tokens) AS tokens, sum(cost_usd) AS cost_usd
FROM (
    SELECT pos, tokens, cost_usd
    FROM lines
    WHERE pos IS NOT NULL
    UNION ALL
    SELECT e.pos, coalesce(a.input_tokens + a.output_tokens, 0), CAST(c.cost_usd AS DECIMAL(38, 18))
    FROM prior_costs c
    JOIN (SELECT record_id, pos FROM expected_at) e ON e.record_id = c.record_id
    LEFT JOIN prior_attempts a ON a.job_key = c.job_key AND a.raw_sha256 = c.raw_sha256
                              AND a.line_no = c.line_no AND a.custom_id = c.custom_id
)
GROUP BY pos;

-- A record that would be retried but has reached a cap goes to the manual
-- queue instead; the token cap is named when both are reached.
UPDATE outcomes
SET disposition = 'manual',
    reason = CASE WHEN {{.TokenCap}} THEN 'token_cap' ELSE 'cost_cap' END
FROM record_usage u
WHERE outcomes.pos = u.pos AND outcomes.disposition = 'retry'
  AND ({{.TokenCap}} OR {{.CostCap}});
{{end}}
