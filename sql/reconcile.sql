-- Reconcile one job: the set algebra of docs/contract.md.
-- Inputs: expected, attempts_raw, quarantine (sources.sql) and the temp tables
-- retry_status(status), retry_codes(code), permanent_codes(code), prices(...),
-- schema_failures(...) (schema.sql).
--
-- This file numbers the job's result files and prices them; lines.sql then
-- classifies and prices every line, and outcomes.sql gives each record its
-- outcome (for a large job one group of buckets at a time: sort.go).

-- Temp tables below need no row order (every read of them orders its own
-- result); letting DuckDB drop it saves memory and time.
SET preserve_insertion_order = false;

-- Each result file once, with two small numbers: file_no in (channel,
-- raw_sha256) order (ties between a record's lines) and out_no in
-- (raw_sha256, channel) order (the costs table's row order).
CREATE OR REPLACE TEMP TABLE files AS
SELECT channel, raw_sha256,
       CAST(row_number() OVER (ORDER BY channel, raw_sha256) AS INTEGER) AS file_no,
       CAST(row_number() OVER (ORDER BY raw_sha256, channel) AS INTEGER) AS out_no
FROM (SELECT DISTINCT channel, raw_sha256 FROM attempts_raw);

-- A price row's model prices a model id that is the same, or the same with
-- version suffixes only (a date, a snapshot number, a Bedrock revision:
-- the pattern is reconcile.SnapshotSuffix, views.sql's model_family strips
-- the same): gpt-4o-mini prices gpt-4o-mini-2024-07-18, but gpt-5.2 does
-- not price gpt-5.2-pro-2025-12-11, nor claude-opus-4 claude-opus-4-6,
-- other models at other prices. Such a line is unpriced, and reported so.
CREATE OR REPLACE TEMP MACRO prices_model(version, model) AS
    version = model
    OR (starts_with(version, model) AND regexp_full_match(substr(version, length(model) + 1), '{{.SnapshotSuffix}}'));

-- The price of each distinct (provider, model version, raw file): the longest
-- matching model of its provider (prices_model), and of that model the row with the
-- latest effective_from at or before the file's ingest time (raw_times).
-- A Bedrock line also matches by the job's model id (job_model), and either
-- id without its inference-profile prefix (us., eu., apac., global.): Claude
-- output says claude-sonnet-4-5-20250929, Converse output says nothing (ingest
-- fills in the job's id, us.anthropic.claude-…), and the price table names
-- the base model, anthropic.claude-sonnet-4-5. A raw file of the sync tail
-- (raw_times.mode sync: answers of the real-time API) is priced on demand,
-- without the batch multiplier.
-- mp_no numbers the rows: lines and costed carry it instead of the provider,
-- model version and price model strings of every line (narrower rows to
-- sort and spill), and the readers name them again (cost_views.sql, and the
-- costs table's Go side).
-- The five prices come again as DECIMAL(18, 12), 64-bit integers, for
-- lines.sql's narrow form of a line's cost; narrow_prices.sql tells whether
-- they are the same values.
CREATE OR REPLACE TEMP TABLE model_prices AS
SELECT *,
       TRY_CAST(input_per_token AS DECIMAL(18, 12)) AS input_n,
       TRY_CAST(cached_per_token AS DECIMAL(18, 12)) AS cached_n,
       TRY_CAST(cache_write_per_token AS DECIMAL(18, 12)) AS cache_write_n,
       TRY_CAST(cache_write_1h_per_token AS DECIMAL(18, 12)) AS cache_write_1h_n,
       TRY_CAST(output_per_token AS DECIMAL(18, 12)) AS output_n
FROM (
SELECT CAST(row_number() OVER () AS INTEGER) AS mp_no,
       m.provider, m.model_version, m.channel, m.raw_sha256, f.file_no, p.model,
       CASE WHEN m.mode = 'sync' THEN p.od_input_per_token ELSE p.input_per_token END AS input_per_token,
       CASE WHEN m.mode = 'sync' THEN p.od_cached_per_token ELSE p.cached_per_token END AS cached_per_token,
       CASE WHEN m.mode = 'sync' THEN p.od_cache_write_per_token ELSE p.cache_write_per_token END AS cache_write_per_token,
       CASE WHEN m.mode = 'sync' THEN p.od_cache_write_1h_per_token ELSE p.cache_write_1h_per_token END AS cache_write_1h_per_token,
       CASE WHEN m.mode = 'sync' THEN p.od_output_per_token ELSE p.output_per_token END AS output_per_token
-- The lines' distinct provider, model version and file first, then their
-- times and job model: the joins see a few rows instead of every line (at
-- 1M lines the statement took half the time).
FROM (SELECT DISTINCT a.provider, a.model_version, a.channel, a.raw_sha256, t.priced_at, t.mode,
             CASE WHEN a.provider = 'bedrock' THEN j.model END AS job_model
      FROM (SELECT DISTINCT provider, model_version, channel, raw_sha256 FROM attempts_raw) a
      LEFT JOIN raw_times t ON t.channel = a.channel AND t.raw_sha256 = a.raw_sha256
      LEFT JOIN job_model j ON j.provider = a.provider) m
JOIN files f ON f.channel = m.channel AND f.raw_sha256 = m.raw_sha256
LEFT JOIN prices p ON p.provider = m.provider
                  AND (prices_model(m.model_version, p.model)
                       OR (m.provider = 'bedrock'
                           AND (prices_model(regexp_replace(m.model_version, '^(us|eu|apac|global)\.', ''), p.model)
                                OR prices_model(m.job_model, p.model)
                                OR prices_model(regexp_replace(m.job_model, '^(us|eu|apac|global)\.', ''), p.model))))
                  AND (p.effective_from IS NULL OR p.effective_from <= m.priced_at)
QUALIFY row_number() OVER (PARTITION BY m.provider, m.model_version, m.channel, m.raw_sha256
                           ORDER BY length(p.model) DESC NULLS LAST, p.effective_from DESC NULLS LAST) = 1
);
