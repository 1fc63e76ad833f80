-- Reconcile one job: the set algebra of CONTRACT §4.
-- Inputs: expected, attempts_raw, quarantine (sources.sql) and the temp tables
-- retry_status(status), retry_codes(code), permanent_codes(code), prices(...),
-- schema_failures(...) (schema.sql).
--
-- Shaped for speed and memory at millions of lines: only the columns the
-- algebra needs are materialised (never output_text), each record's best line
-- comes from one hash aggregate instead of window functions over every line,
-- and prices are resolved once per distinct model version, not per line.

-- Every result line, joined to its record by custom_id (never by line number)
-- and classified. record_id IS NULL marks an unknown id.
CREATE OR REPLACE TEMP TABLE lines AS
WITH gated AS (
    -- The quality gate sees the whole normalised result row; only what the
    -- algebra needs is kept.
    SELECT job_key, tenant, provider, custom_id, channel, raw_sha256, line_no, status_code, outcome,
           error_code, error_type, model_version, input_tokens, cached_input_tokens, cache_write_tokens, output_tokens,
           coalesce(outcome = 'success' AND has_output AND ({{.Gate}}), false)
             -- --output-schema: lines whose output failed the JSON Schema
             AND NOT EXISTS (SELECT 1 FROM schema_failures f
                             WHERE f.s_raw = attempts_raw.raw_sha256 AND f.s_channel = attempts_raw.channel
                               AND f.s_line = attempts_raw.line_no) AS gate_ok
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

-- One row per record with a line: how many lines it had and its best line.
-- Outcome precedence: succeeded > quality_failed > failed_retryable >
-- failed_permanent; ties go to the first line in (channel, raw_sha256,
-- line_no) order, which identifies a line uniquely. min() of a struct compares
-- its fields in order.
CREATE OR REPLACE TEMP TABLE best AS
SELECT
    record_id,
    count(*) AS lines,
    min({
        'rank': CASE class WHEN 'succeeded' THEN 1 WHEN 'quality_failed' THEN 2 WHEN 'failed_retryable' THEN 3 ELSE 4 END,
        'channel': channel, 'raw_sha256': raw_sha256, 'line_no': line_no,
        'class': class, 'error_code': error_code, 'status_code': status_code
    }) AS b
FROM lines
WHERE record_id IS NOT NULL
GROUP BY record_id;

-- One row per expected record: its best line (if any) and how many lines it had.
CREATE OR REPLACE TEMP TABLE outcomes AS
SELECT
    e.job_key, e.tenant, e.record_id, e.business_key, e.shard_id, e.shard_line, e.custom_id,
    e.attempt, e.parent_job_key,
    coalesce(b.b.class, 'missing') AS outcome,
    CASE
        WHEN b.b.class IS NULL THEN 'missing'
        WHEN b.b.class = 'quality_failed' THEN 'quality_gate'
        WHEN b.b.class = 'succeeded' THEN ''
        ELSE coalesce(nullif(b.b.error_code, ''), 'http_' || CAST(b.b.status_code AS VARCHAR), 'unknown_error')
    END AS reason,
    coalesce(b.lines, 0) AS lines,
    CASE
        WHEN b.b.class = 'succeeded' THEN 'accepted'
        WHEN coalesce(b.b.class, 'missing') IN ('missing', 'failed_retryable', 'quality_failed')
             AND e.attempt < {{.MaxAttempts}} THEN 'retry'
        ELSE 'manual'
    END AS disposition
FROM expected e
LEFT JOIN best b ON b.record_id = e.record_id;

-- The price of each distinct (provider, model version, raw file): the longest
-- matching model prefix of its provider, and of that model the row with the
-- latest effective_from at or before the file's ingest time (raw_times).
CREATE OR REPLACE TEMP TABLE model_prices AS
SELECT m.provider, m.model_version, m.channel, m.raw_sha256, p.model, p.input_per_token, p.cached_per_token,
       p.cache_write_per_token, p.output_per_token
FROM (SELECT DISTINCT l.provider, l.model_version, l.channel, l.raw_sha256, t.priced_at
      FROM lines l LEFT JOIN raw_times t ON t.channel = l.channel AND t.raw_sha256 = l.raw_sha256) m
LEFT JOIN prices p ON p.provider = m.provider AND starts_with(m.model_version, p.model)
                  AND (p.effective_from IS NULL OR p.effective_from <= m.priced_at)
QUALIFY row_number() OVER (PARTITION BY m.provider, m.model_version, m.channel, m.raw_sha256
                           ORDER BY length(p.model) DESC NULLS LAST, p.effective_from DESC NULLS LAST) = 1;

-- Every line priced. A record's first success is its best line when that
-- line succeeded; its other successes are duplicate submissions.
CREATE OR REPLACE TEMP TABLE line_costs AS
SELECT
    l.job_key, l.tenant, l.record_id, l.custom_id, l.attempt, l.provider, l.model_version,
    l.raw_sha256, l.line_no, l.channel,
    CASE
        WHEN l.record_id IS NULL THEN 'unattributed'
        WHEN l.class = 'succeeded' AND b.b.channel = l.channel AND b.b.raw_sha256 = l.raw_sha256
             AND b.b.line_no = l.line_no THEN 'first_success'
        WHEN l.class = 'succeeded' THEN 'duplicate_submission'
        WHEN l.class = 'quality_failed' THEN 'quality_failure'
        WHEN l.class = 'failed_retryable' THEN 'retryable_failure'
        ELSE 'permanent_failure'
    END AS category,
    p.model AS price_model,
    (l.input_tokens + l.output_tokens) > 0 AND p.model IS NULL AS unpriced,
    coalesce(
        CAST(l.input_tokens - l.cached_input_tokens - l.cache_write_tokens AS DECIMAL(18, 0)) * p.input_per_token
      + CAST(l.cached_input_tokens AS DECIMAL(18, 0)) * p.cached_per_token
      + CAST(l.cache_write_tokens AS DECIMAL(18, 0)) * p.cache_write_per_token
      + CAST(l.output_tokens AS DECIMAL(18, 0)) * p.output_per_token,
        CAST(0 AS DECIMAL(38, 18))) AS cost_usd
FROM lines l
LEFT JOIN model_prices p ON p.provider = l.provider AND p.model_version = l.model_version
                        AND p.channel = l.channel AND p.raw_sha256 = l.raw_sha256
LEFT JOIN best b ON b.record_id = l.record_id;
