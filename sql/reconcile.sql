-- Reconcile one job: the set algebra of CONTRACT §4.
-- Inputs: expected, attempts_raw, quarantine (sources.sql) and the temp tables
-- retry_status(status), retry_codes(code), permanent_codes(code), prices(...).

-- Every result line, joined to its record by custom_id (never by line number)
-- and classified. record_id IS NULL marks an unknown id.
CREATE OR REPLACE TEMP TABLE lines AS
WITH gated AS (
    -- The quality gate sees only the normalised result row.
    SELECT *, coalesce(outcome = 'success' AND has_output AND ({{.Gate}}), false) AS gate_ok
    FROM attempts_raw
)
SELECT
    a.* EXCLUDE (gate_ok),
    e.record_id,
    e.shard_id,
    e.attempt,
    CASE
        WHEN a.gate_ok THEN 'succeeded'
        WHEN a.outcome = 'success' THEN 'quality_failed'
        WHEN a.error_code IN (SELECT code FROM permanent_codes) THEN 'failed_permanent'
        WHEN a.status_code IN (SELECT status FROM retry_status)
          OR a.error_code IN (SELECT code FROM retry_codes)
          OR a.error_type IN (SELECT code FROM retry_codes) THEN 'failed_retryable'
        ELSE 'failed_permanent'
    END AS class
FROM gated a
LEFT JOIN expected e ON e.custom_id = a.custom_id;

-- Outcome precedence: succeeded > quality_failed > failed_retryable > failed_permanent.
CREATE OR REPLACE TEMP TABLE ranked AS
SELECT *,
    CASE class WHEN 'succeeded' THEN 1 WHEN 'quality_failed' THEN 2 WHEN 'failed_retryable' THEN 3 ELSE 4 END AS rank,
    row_number() OVER (PARTITION BY record_id, class ORDER BY channel, raw_sha256, line_no) AS nth_in_class
FROM lines;

-- One row per expected record: its best line (if any) and how many lines it had.
CREATE OR REPLACE TEMP TABLE outcomes AS
WITH best AS (
    SELECT * FROM ranked
    WHERE record_id IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY record_id ORDER BY rank, channel, raw_sha256, line_no) = 1
), n AS (
    SELECT record_id, count(*) AS lines FROM ranked WHERE record_id IS NOT NULL GROUP BY record_id
)
SELECT
    e.job_key, e.tenant, e.record_id, e.business_key, e.shard_id, e.shard_line, e.custom_id,
    e.attempt, e.parent_job_key,
    coalesce(b.class, 'missing') AS outcome,
    CASE
        WHEN b.class IS NULL THEN 'missing'
        WHEN b.class = 'quality_failed' THEN 'quality_gate'
        WHEN b.class = 'succeeded' THEN ''
        ELSE coalesce(nullif(b.error_code, ''), 'http_' || CAST(b.status_code AS VARCHAR), 'unknown_error')
    END AS reason,
    coalesce(n.lines, 0) AS lines,
    CASE
        WHEN b.class = 'succeeded' THEN 'accepted'
        WHEN coalesce(b.class, 'missing') IN ('missing', 'failed_retryable', 'quality_failed')
             AND e.attempt < {{.MaxAttempts}} THEN 'retry'
        ELSE 'manual'
    END AS disposition
FROM expected e
LEFT JOIN best b ON b.record_id = e.record_id
LEFT JOIN n ON n.record_id = e.record_id;

-- Every line priced by the longest matching model prefix of its provider.
CREATE OR REPLACE TEMP TABLE line_costs AS
SELECT
    l.job_key, l.tenant, l.record_id, l.custom_id, l.attempt, l.provider, l.model_version,
    l.raw_sha256, l.line_no, l.channel,
    CASE
        WHEN l.record_id IS NULL THEN 'unattributed'
        WHEN l.class = 'succeeded' AND l.nth_in_class = 1 THEN 'first_success'
        WHEN l.class = 'succeeded' THEN 'duplicate_submission'
        WHEN l.class = 'quality_failed' THEN 'quality_failure'
        WHEN l.class = 'failed_retryable' THEN 'retryable_failure'
        ELSE 'permanent_failure'
    END AS category,
    p.model AS price_model,
    (l.input_tokens + l.output_tokens) > 0 AND p.model IS NULL AS unpriced,
    coalesce(
        CAST(l.input_tokens - l.cached_input_tokens AS DECIMAL(18, 0)) * p.input_per_token
      + CAST(l.cached_input_tokens AS DECIMAL(18, 0)) * p.cached_per_token
      + CAST(l.output_tokens AS DECIMAL(18, 0)) * p.output_per_token,
        CAST(0 AS DECIMAL(38, 18))) AS cost_usd
FROM ranked l
LEFT JOIN prices p ON p.provider = l.provider AND starts_with(l.model_version, p.model)
QUALIFY row_number() OVER (PARTITION BY l.raw_sha256, l.channel, l.line_no ORDER BY length(p.model) DESC NULLS LAST) = 1;
