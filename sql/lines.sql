-- Every result line of the sources in view classified and priced, and each
-- record's best line (run after reconcile.sql, which numbers the files and
-- prices them). Inputs: expected and attempts_raw (sources.sql, or for one
-- group of a large job's buckets partition_sources.sql), files, model_prices,
-- the rule tables and schema_failures.
--
-- Shaped for speed and memory at millions of lines: only the columns the
-- algebra needs are materialised (never output_text, never job_key or tenant,
-- raw files as small integers instead of 64-character digests), each line is
-- priced where it is classified, and each record's best line, line count and
-- cost come from one hash aggregate over an integer precedence key.
--
-- A job's records and their lines share a bucket (the partition function of
-- the custom_id), so a large job is classified a group of buckets at a time:
-- each group's outcomes (outcomes.sql) join only its own records, lines and
-- best lines, and come out clustered by expected file. The first group creates lines, each later one (.Insert) adds
-- its rows; grp keeps each group's rows apart for best and outcomes.sql.
SET preserve_insertion_order = false;

-- Every result line, joined to its record by custom_id (never by line number),
-- classified and priced. pos IS NULL marks an unknown id. rank is the
-- outcome precedence: 1 succeeded, 2 quality_failed, 3 failed_retryable,
-- 4 failed_permanent; line_key orders a record's lines by (rank, channel,
-- raw_sha256, line_no), which identifies a line uniquely, packed in a BIGINT
-- (rank << 59 | file_no << 40 | line_no: up to 2^19 files of 2^40 lines).
{{if .Insert}}INSERT INTO lines BY NAME{{else}}CREATE OR REPLACE TEMP TABLE lines AS{{end}}
WITH gated AS (
    -- The quality gate sees the whole normalised result row; only what the
    -- algebra needs is kept.
    SELECT provider, custom_id, channel, raw_sha256, line_no, status_code, outcome,
           error_code, error_type, model_version, input_tokens, cached_input_tokens, cache_write_tokens,
           cache_write_1h_tokens, output_tokens,
           finish_reason, response_status,
           coalesce(outcome = 'success' AND has_output AND ({{.Gate}}), false) AS gate_pass,
           -- --output-schema (the job's output contract): lines whose output
           -- failed the JSON Schema. A join, not NOT EXISTS: over a group's
           -- sources (a union) DuckDB ran that as a join that first buffers
           -- every line, a third of the statement's time.
           sf.s_line IS NULL AS schema_ok
    FROM attempts_raw
    LEFT JOIN (SELECT DISTINCT s_raw, s_channel, s_line FROM schema_failures) sf
      ON sf.s_raw = raw_sha256 AND sf.s_channel = channel AND sf.s_line = line_no
),
-- An answer cut at its token limit: OpenAI chat and completions
-- finish_reason length, a Responses body incomplete for any reason but its
-- content filter (ingest keeps incomplete_details.reason, max_output_tokens,
-- as finish_reason), Anthropic and Bedrock Claude / Converse stop_reason
-- max_tokens or model_context_window_exceeded, Gemini MAX_TOKENS, Bedrock
-- Titan LENGTH, Llama and Mistral length. Unless .AcceptTruncated, such a
-- line fails the quality gate (reason truncated).
cut AS (
    SELECT a.*, a.gate_pass AND a.schema_ok AS gate_ok,
        coalesce(a.outcome = 'success'
             AND (a.finish_reason IN ('length', 'max_tokens', 'model_context_window_exceeded', 'MAX_TOKENS', 'LENGTH', 'max_output_tokens')
                  OR (a.response_status = 'incomplete' AND coalesce(a.finish_reason, '') <> 'content_filter')), false) AS truncated
    FROM gated a
),
classified AS (
    SELECT a.*,
        CAST(CASE
            WHEN a.gate_ok{{if not .AcceptTruncated}} AND NOT a.truncated{{end}} THEN 1
            WHEN a.outcome = 'success' THEN 2
            -- A real-time call of the sync tail that may have reached the
            -- provider without an answer (maybe_sent): worth another attempt.
            WHEN a.error_code = 'maybe_sent' THEN 3
            WHEN a.error_code IN (SELECT code FROM permanent_codes) THEN 4
            WHEN a.status_code IN (SELECT status FROM retry_status)
              OR a.error_code IN (SELECT code FROM retry_codes)
              OR a.error_type IN (SELECT code FROM retry_codes) THEN 3
            ELSE 4
        END AS BIGINT) AS rank
    FROM cut a
),
-- Ingest quarantines a line whose token counts are negative, above its
-- ceiling of 10^9 per line or inconsistent; a line ingested before those
-- checks existed is priced at nothing and counted unpriced instead of
-- failing the cast below (or pricing negative) on every reconcile.
checked AS (
    SELECT a.* REPLACE (coalesce(a.cache_write_tokens, 0) AS cache_write_tokens,
                        coalesce(a.cache_write_1h_tokens, 0) AS cache_write_1h_tokens),
        coalesce(a.input_tokens BETWEEN 0 AND 1000000000
             AND a.cached_input_tokens BETWEEN 0 AND 1000000000
             AND coalesce(a.cache_write_tokens, 0) BETWEEN 0 AND 1000000000
             AND coalesce(a.cache_write_1h_tokens, 0) BETWEEN 0 AND coalesce(a.cache_write_tokens, 0)
             AND a.output_tokens BETWEEN 0 AND 1000000000
             AND CAST(a.cached_input_tokens AS HUGEINT) + coalesce(a.cache_write_tokens, 0) <= a.input_tokens, false) AS usage_ok
    FROM classified a
)
SELECT
    -- A line of a known record is named by its record's pos alone: its
    -- custom_id would be a string per line in memory, and in the spill at
    -- 10M records.
    p.mp_no, CASE WHEN e.pos IS NULL THEN a.custom_id END AS custom_id, a.line_no, a.status_code, a.error_code,
    f.file_no,
    -- The record's place in the expected files (sources.sql), NULL for an
    -- unknown id: the costs table is written in that order, each line named
    -- by its record there (tables.go), so neither lines nor costed carries
    -- record strings.
    e.pos,
    CAST(a.rank AS UTINYINT) AS rank,
    a.truncated,
    NOT a.schema_ok AS schema_failed,
    CASE WHEN a.line_no >= 1099511627776 OR f.file_no >= 524288 THEN error('reconcile: over 2^19 result files or 2^40 lines in one file')
         ELSE (a.rank << 59) | (CAST(f.file_no AS BIGINT) << 40) | a.line_no END AS line_key,
    CASE WHEN a.usage_ok THEN a.input_tokens + a.output_tokens ELSE 0 END AS tokens,
    CASE WHEN a.usage_ok THEN (a.input_tokens + a.output_tokens) > 0 AND p.model IS NULL ELSE true END AS unpriced,
    -- The line's cost (docs/costs.md): uncached input, cached input, 5-minute
    -- and one-hour cache writes and output (reasoning and thinking tokens
    -- included) each at its per-token price.
    -- .Narrow (narrow_prices.sql): the same sum in DECIMAL(18, 12), exact
    -- for this job's prices, in 64-bit arithmetic (the statement takes about
    -- a sixth less cpu time than with DECIMAL(38, 18)'s 128-bit products).
    coalesce(CASE WHEN a.usage_ok THEN
{{- if .Narrow}}
        CAST(CAST(a.input_tokens - a.cached_input_tokens - a.cache_write_tokens AS DECIMAL(18, 0)) * p.input_n
           + CAST(a.cached_input_tokens AS DECIMAL(18, 0)) * p.cached_n
           + CAST(a.cache_write_tokens - a.cache_write_1h_tokens AS DECIMAL(18, 0)) * p.cache_write_n
           + CAST(a.cache_write_1h_tokens AS DECIMAL(18, 0)) * p.cache_write_1h_n
           + CAST(a.output_tokens AS DECIMAL(18, 0)) * p.output_n AS DECIMAL(38, 18))
{{- else}}
        CAST(a.input_tokens - a.cached_input_tokens - a.cache_write_tokens AS DECIMAL(18, 0)) * p.input_per_token
      + CAST(a.cached_input_tokens AS DECIMAL(18, 0)) * p.cached_per_token
      + CAST(a.cache_write_tokens - a.cache_write_1h_tokens AS DECIMAL(18, 0)) * p.cache_write_per_token
      + CAST(a.cache_write_1h_tokens AS DECIMAL(18, 0)) * p.cache_write_1h_per_token
      + CAST(a.output_tokens AS DECIMAL(18, 0)) * p.output_per_token
{{- end}} END,
        CAST(0 AS DECIMAL(38, 18))) AS cost_usd,
    CAST({{.Group}} AS USMALLINT) AS grp
FROM checked a
JOIN files f ON f.channel = a.channel AND f.raw_sha256 = a.raw_sha256
-- Every line has its row (model_prices holds each distinct file, provider
-- and model version of the lines, a model version NULL in files ingested
-- before ingest filled it in).
LEFT JOIN model_prices p ON p.file_no = f.file_no AND p.provider = a.provider AND p.model_version IS NOT DISTINCT FROM a.model_version
LEFT JOIN (SELECT custom_id, pos FROM expected_at) e ON e.custom_id = a.custom_id;

-- One row per record with a line: how many lines it had, what they cost and
-- its best line, the least line_key (which is unique); outcomes.sql looks up
-- what else it needs of that line. Only fixed-size aggregates: a min() over
-- a struct of the line's fields would build a sort key for every line and
-- keep one per record in memory DuckDB's limit does not count (at 10M
-- records about a third of a GiB, beyond --memory-limit).
CREATE OR REPLACE TEMP TABLE best AS
SELECT
    pos,
    count(*) AS lines,
    sum(cost_usd) AS cost_usd,
    min(line_key) AS line_key
FROM lines
WHERE pos IS NOT NULL AND grp = {{.Group}}
GROUP BY pos;

-- The succeeded lines that are not their record's best: the duplicate
-- submissions of records answered more than once, few. line_costs.sql tells
-- a first success from a duplicate by them, instead of joining every line to
-- every record's best line (at 10M records a join that did not fit in memory).
{{if .Insert}}INSERT INTO not_best{{else}}CREATE OR REPLACE TEMP TABLE not_best AS{{end}}
SELECT l.line_key
FROM lines l
JOIN (SELECT pos, line_key FROM best WHERE lines > 1) b ON b.pos = l.pos
WHERE l.grp = {{.Group}} AND l.rank = 1 AND l.line_key <> b.line_key;
