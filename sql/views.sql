-- The lake's public views (docs/contract.md). {{.Kind}} is TEMP VIEW for a
-- session, VIEW for a catalog database. Each source (.Expected, …) is a
-- FROM item: read_parquet over an explicit list of committed files (a
-- session, a snapshot catalog; with, for the jobs a compaction covers, the
-- compaction's files: reconcile/compact.go), or a view of
-- catalog_sources.sql (a live catalog).

-- One row per ingest of a raw result file (the lake's ingest records).
CREATE OR REPLACE {{.Kind}} ingests AS
SELECT * FROM {{.Ingests}};

-- One row per provider batch of a shard, with completed_at: when status
-- first recorded it terminal at the provider (NULL while it is not).
CREATE OR REPLACE {{.Kind}} batches AS
SELECT * FROM {{.Batches}};

-- job_key first, as the contract lists it, whichever column of their files
-- holds it (the last from table format 9 on).
CREATE OR REPLACE {{.Kind}} expected AS
SELECT job_key, * EXCLUDE (job_key) FROM {{.Expected}};

CREATE OR REPLACE {{.Kind}} attempts_raw AS
SELECT * FROM {{.Attempts}};

-- Each line with its record (record_id, business_key, attempt through the
-- job's expected rows), the time its raw file was ingested and the time its
-- batch completed (NULL for a file ingested by hand with no batch id, or a
-- batch not seen terminal), so one record's attempts or cost per day need
-- no join.
CREATE OR REPLACE {{.Kind}} attempts AS
SELECT a.job_key, a.tenant, e.shard_id, a.provider, a.provider_job_id, a.provider_request_id, a.custom_id,
       e.record_id, e.business_key, e.attempt, a.channel, a.raw_sha256, a.line_no, a.status_code, a.outcome, a.error_code,
       a.error_type, a.error_message, a.model_version, a.input_tokens, a.cached_input_tokens, a.cache_write_tokens,
       a.output_tokens, a.reasoning_tokens, a.finish_reason, a.response_status, a.has_output, a.output_text, a.tool_calls,
       -- Columns added later read 0 from files written before them.
       coalesce(a.cache_write_1h_tokens, 0) AS cache_write_1h_tokens, coalesce(a.web_search_requests, 0) AS web_search_requests,
       i.ingested_at, b.completed_at AS batch_completed_at
FROM attempts_raw a
LEFT JOIN expected e ON e.job_key = a.job_key AND e.custom_id = a.custom_id
LEFT JOIN ingests i ON i.job_key = a.job_key AND i.channel = a.channel AND i.raw_sha256 = a.raw_sha256
LEFT JOIN (SELECT job_key, provider_job_id, min(completed_at) AS completed_at FROM batches
           WHERE provider_job_id <> '' GROUP BY ALL) b
       ON b.job_key = a.job_key AND b.provider_job_id = a.provider_job_id;

CREATE OR REPLACE {{.Kind}} quarantine AS
SELECT * FROM {{.Quarantine}};

-- cost_usd is DECIMAL(38, 18) in the files of table format 2 and exact
-- decimal text in those of format 1; read together they come as text, so
-- the view casts: DECIMAL whatever the lake's age, and sum(cost_usd) needs
-- no cast (the same in costs).
CREATE OR REPLACE {{.Kind}} outcomes AS
SELECT * REPLACE (CAST(cost_usd AS DECIMAL(38, 18)) AS cost_usd)
FROM {{.Outcomes}};

-- model_family groups a model's dated versions under one name: the price
-- table's model that priced the line (gpt-4o-mini for gpt-4o-mini-2024-07-18),
-- or, for a line no row priced, model_version without its trailing version
-- suffixes: a date (-2024-07-18, -20241022, @20241022), a 3- or 4-digit
-- snapshot (-0125, -002) and a Bedrock revision (-v1:0), stripped as often as
-- they repeat.
-- ingested_at is the line's raw file's ingest time (the time it was priced
-- at), so cost per day needs no join.
CREATE OR REPLACE {{.Kind}} costs AS
SELECT c.* REPLACE (CAST(c.cost_usd AS DECIMAL(38, 18)) AS cost_usd),
       coalesce(nullif(c.price_model, ''),
                regexp_replace(c.model_version, '([-@]([0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{8}|[0-9]{3,4}|v[0-9]+(:[0-9]+)?))+$', ''))
           AS model_family,
       i.ingested_at
FROM {{.Costs}} c
LEFT JOIN (SELECT job_key, raw_sha256, min(ingested_at) AS ingested_at FROM ingests GROUP BY ALL) i
       ON i.job_key = c.job_key AND i.raw_sha256 = c.raw_sha256;

CREATE OR REPLACE {{.Kind}} manifests AS
SELECT * FROM {{.Manifests}};

CREATE OR REPLACE {{.Kind}} shards AS
SELECT * FROM {{.Shards}};

CREATE OR REPLACE {{.Kind}} ledger AS
SELECT * FROM {{.Ledger}};

-- When each raw file of a job first counted in a committed report.
CREATE OR REPLACE {{.Kind}} report_files AS
SELECT * FROM {{.ReportFiles}};

-- The write-back table: exactly one accepted result per record across every
-- generation. Candidates are the lines that passed the quality gate (the
-- reconcile priced them first_success or duplicate_submission) in a job whose
-- outcome for the record is succeeded. The first to count wins: ordered by the
-- time its file first appeared in a committed report, then attempt, channel,
-- raw_sha256, line_no. A late duplicate (a later output file of the same job,
-- or a success of an earlier attempt that arrives after a retry succeeded)
-- reaches a report later, so it can never replace a result already accepted.
-- The candidates are part_candidates.sql's.
CREATE OR REPLACE {{.Kind}} accepted AS
SELECT c.record_id, o.business_key, a.tenant, a.job_key, c.attempt, a.custom_id, a.model_version, a.output_text,
       a.raw_sha256, a.line_no, a.channel, f.first_reconciled_at AS accepted_at
{{template "candidate_lines"}}
LEFT JOIN report_files f ON f.job_key = a.job_key AND f.raw_sha256 = a.raw_sha256
QUALIFY row_number() OVER (PARTITION BY c.record_id
                           ORDER BY f.first_reconciled_at NULLS LAST, c.attempt, a.channel, a.raw_sha256, a.line_no) = 1;

-- The manual queue: records whose latest disposition (by latest_key,
-- part_latest.sql, as in the records view) is manual and that have no
-- accepted result (a late success settles a record no person need touch),
-- with the outcome and reason of that latest outcome.
-- Only the records with a manual outcome at all are looked at (a queued
-- record has one; a few of a large job's), and for them only numbers are
-- aggregated: the latest key, whether that latest disposition is manual,
-- whether any outcome succeeded (a record has an accepted result exactly
-- when some job's outcome for it is succeeded: accepted_outcome,
-- part_candidates.sql), the attempts and the cost. The latest row's strings
-- are joined back by its key, as the records view does: keeping a string per
-- record in the aggregate (arg_max of the business key, the outcome, the
-- reason, the job key) held them outside DuckDB's memory limit: with nearly
-- every record of a 10M job in the queue it ran out of memory.
CREATE OR REPLACE {{.Kind}} manual AS
WITH m AS MATERIALIZED (
    SELECT record_id, {{template "latest_key"}} AS latest_key, disposition = 'manual' AS manual,
           {{template "accepted_outcome"}} AS accepted, attempt, CAST(cost_usd AS DECIMAL(38, 18)) AS cost_usd
    FROM outcomes
    WHERE record_id IN (SELECT record_id FROM outcomes WHERE disposition = 'manual')
),
per AS (
    SELECT record_id, max(latest_key) AS latest_key, arg_max(manual, latest_key) AS manual,
           bool_or(accepted) AS accepted, max(attempt) AS attempts, sum(cost_usd) AS cost_usd
    FROM m
    GROUP BY record_id
)
SELECT p.record_id, l.tenant, l.business_key, l.outcome, l.reason, p.attempts, l.job_key AS last_job_key, p.cost_usd
FROM per p
JOIN (SELECT *, {{template "latest_key"}} AS latest_key FROM outcomes) l
  ON l.record_id = p.record_id AND l.latest_key = p.latest_key
WHERE p.manual AND NOT p.accepted;

-- Each record's latest state across every generation of retries, with the
-- provider and model of its latest attempt's job (a fallback child's when
-- the record was retried on another provider): for a succeeded record, who
-- finally answered it (the exact model version is the accepted view's).
--
-- The latest row is found by a number (latest_key, part_latest.sql), and
-- its columns are joined back: an aggregate keeping a string per record
-- (arg_max of the business key, the outcome, the job key) holds them where
-- DuckDB cannot spill them, and at 10M records does not fit the default
-- memory limit.
CREATE OR REPLACE {{.Kind}} records AS
WITH keyed AS (
    SELECT *, {{template "latest_key"}} AS latest_key
    FROM outcomes
),
r AS (
    SELECT record_id, max(latest_key) AS latest_key, max(attempt) AS attempts,
           sum(CAST(cost_usd AS DECIMAL(38, 18))) AS cost_usd
    FROM keyed
    GROUP BY record_id
)
SELECT r.record_id, l.tenant, l.business_key, l.outcome AS final_state, l.disposition, r.attempts,
       l.job_key AS last_job_key, r.cost_usd,
       -- The latest attempt's answer was cut at its token limit (outcomes
       -- written before the column existed say false).
       coalesce(l.truncated, false) AS truncated,
       m.provider, m.model
FROM r
JOIN keyed l ON l.record_id = r.record_id AND l.latest_key = r.latest_key
LEFT JOIN manifests m ON m.job_key = l.job_key;
