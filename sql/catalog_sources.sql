-- A live catalog's sources (catalog.go): what views.sql reads, made from the
-- lake's own folders each time a view is queried, so that jobs, ingests and
-- reconciles that land after the catalog was written are seen without
-- writing it again. The paths (.Manifests, …: quoted globs, or an empty
-- stand-in file for a folder that had no file when the catalog was written)
-- are relative to the folder that holds the catalog file; DuckDB resolves
-- them against its current directory, so the catalog is opened from there.
--
-- They give the same rows as the session's views built in Go (views.go):
-- the JSON markers are read here as they are there, and a table file counts
-- only when a marker names it (a manifest's expected_files, an ingest
-- record's attempts_file and quarantine_file, the outcomes_file and
-- costs_file of each job's latest report), so orphans and the files of
-- earlier reconciles are left out exactly as in a session. Markers are not
-- re-hashed here: `batchlake verify` proves the lake's bytes. DuckDB's JSON
-- arrows bind looser than comparisons: (body->>'x') = y needs its brackets.

CREATE OR REPLACE VIEW _lake_manifests AS
SELECT body->>'job_key' AS job_key, body->>'tenant' AS tenant, body
FROM read_json({{.Manifests}}, columns = {format: 'VARCHAR', sha256: 'VARCHAR', body: 'JSON'})
WHERE format = 'batchlake.manifest/v1'{{if .Tenant}} AND (body->>'tenant') = {{.Tenant}}{{end}};

-- Each job's shards in manifest order (shard_no orders ties below as the
-- Go side's loop over the manifest's shards does).
CREATE OR REPLACE VIEW _lake_shards AS
SELECT job_key, tenant, shard_no, s->>'shard_id' AS shard_id,
       regexp_replace(s->>'file_sha256', '^sha256-', '') AS file_sha256,
       CAST(s->>'records' AS BIGINT) AS records, CAST(s->>'bytes' AS BIGINT) AS bytes
FROM (
    SELECT job_key, tenant, unnest(CAST(body->'shards' AS JSON[])) AS s,
           generate_subscripts(CAST(body->'shards' AS JSON[]), 1) AS shard_no
    FROM _lake_manifests
);

-- Ledger events of the manifests' shards (not the job-wide _job events).
CREATE OR REPLACE VIEW _lake_events AS
SELECT e.body->>'job_key' AS job_key, s.tenant, e.body->>'shard_id' AS shard_id, s.shard_no,
       CAST(e.body->>'seq' AS BIGINT) AS seq, e.body->>'state' AS state,
       CAST(e.body->>'at' AS TIMESTAMPTZ) AS event_at, e.body->>'actor' AS actor,
       coalesce(e.body->>'provider_job_id', '') AS provider_job_id,
       coalesce(e.body->>'lease_expires', '') AS lease_expires,
       e.body->'detail' AS detail
FROM read_json({{.Ledger}}, columns = {format: 'VARCHAR', sha256: 'VARCHAR', body: 'JSON'}) e
JOIN _lake_shards s ON s.job_key = (e.body->>'job_key') AND s.shard_id = (e.body->>'shard_id')
WHERE e.format = 'batchlake.ledger-event/v1';

CREATE OR REPLACE VIEW _lake_ingests AS
SELECT i.body->>'job_key' AS job_key, m.tenant, i.body->>'channel' AS channel,
       regexp_replace(i.body->>'raw_sha256', '^sha256-', '') AS raw_sha256,
       coalesce(i.body->>'provider_job_id', '') AS provider_job_id,
       CAST(i.body->>'lines' AS BIGINT) AS lines, CAST(i.body->>'ingested_at' AS TIMESTAMPTZ) AS ingested_at,
       coalesce(i.body->>'attempts_file', '') AS attempts_file,
       coalesce(i.body->>'quarantine_file', '') AS quarantine_file
FROM read_json({{.Ingests}}, columns = {format: 'VARCHAR', sha256: 'VARCHAR', body: 'JSON'}) i
JOIN _lake_manifests m ON m.job_key = (i.body->>'job_key')
WHERE i.format = 'batchlake.ingest/v1';

-- Reports a ledger event names (a report no event names was not committed).
CREATE OR REPLACE VIEW _lake_reports AS
SELECT r.key, r.body
FROM (
    SELECT regexp_extract(filename, '(reports/[0-9a-f]{64}/[0-9a-f]{64}\.json)$', 1) AS key, body
    FROM read_json({{.Reports}}, columns = {format: 'VARCHAR', sha256: 'VARCHAR', body: 'JSON'}, filename = true)
    WHERE format = 'batchlake.report/v1'
) r
WHERE r.key IN (SELECT (detail->>'report') FROM _lake_events WHERE (detail->>'report') IS NOT NULL);

-- Each job's current report: the one its latest ledger event with a report
-- names (ties: the later shard in the manifest, then the later event).
CREATE OR REPLACE VIEW _lake_latest AS
SELECT e.job_key, r.body->>'outcomes_file' AS outcomes_file, r.body->>'costs_file' AS costs_file
FROM (
    SELECT job_key, arg_max(detail->>'report', row(event_at, shard_no, seq)) AS report
    FROM _lake_events
    WHERE (detail->>'report') IS NOT NULL
    GROUP BY job_key
) e
JOIN _lake_reports r ON r.key = e.report;

-- The table files the markers name: the only ones the views read.
CREATE OR REPLACE VIEW _lake_files AS
SELECT unnest(CAST(body->'expected_files' AS VARCHAR[])) AS key FROM _lake_manifests
UNION ALL SELECT attempts_file FROM _lake_ingests WHERE attempts_file <> ''
UNION ALL SELECT quarantine_file FROM _lake_ingests WHERE quarantine_file <> ''
UNION ALL SELECT outcomes_file FROM _lake_latest WHERE coalesce(outcomes_file, '') <> ''
UNION ALL SELECT costs_file FROM _lake_latest WHERE coalesce(costs_file, '') <> '';

{{range .Tables}}
CREATE OR REPLACE VIEW _lake_{{.Name}} AS
SELECT * EXCLUDE (filename)
FROM read_parquet({{.Glob}}, filename = true, union_by_name = true, hive_partitioning = false)
WHERE regexp_extract(filename, '(tables/[a-z_]+/tenant=[^/]+/job=[0-9a-f]{64}/[0-9a-f]{64}\.parquet)$', 1)
      IN (SELECT key FROM _lake_files);
{{end}}

-- The small tables the session builds from the markers (views.go), here as
-- views over them.
CREATE OR REPLACE VIEW _lake_manifest_rows AS
SELECT job_key, tenant, body->>'provider' AS provider, body->>'model' AS model, body->>'endpoint' AS endpoint,
       coalesce(body->>'prompt_version', '') AS prompt_version, coalesce(body->>'source_version', '') AS source_version,
       coalesce(body->>'dataset_version', '') AS dataset_version,
       coalesce(body->>'generation_config_hash', '') AS generation_config_hash, body->>'input_sha256' AS input_sha256,
       CAST(body->>'expected_records' AS BIGINT) AS expected_records, CAST(body->>'attempt' AS INTEGER) AS attempt,
       coalesce(body->>'parent_job_key', '') AS parent_job_key, CAST(body->>'created_at' AS TIMESTAMPTZ) AS created_at,
       coalesce(body->>'submitted_by', '') AS submitted_by, coalesce(body->>'cost_center', '') AS cost_center,
       coalesce(body->>'retention', '') AS retention, coalesce(body->>'output_schema_version', '') AS output_schema_version,
       CAST(body->>'not_before' AS TIMESTAMPTZ) AS not_before,
       coalesce(body->>'parent_provider', '') AS parent_provider, coalesce(body->>'parent_model', '') AS parent_model,
       coalesce(body->>'output_schema', '') AS output_schema
FROM _lake_manifests;

-- A shard's state is its last event's; its batch the last one bound.
CREATE OR REPLACE VIEW _lake_shard_rows AS
SELECT s.job_key, s.tenant, s.shard_id, s.file_sha256, s.records, s.bytes,
       coalesce(e.provider_job_id, '') AS provider_job_id, coalesce(e.state, '') AS state
FROM _lake_shards s
LEFT JOIN (
    SELECT job_key, shard_id, arg_max(state, seq) AS state,
           arg_max(provider_job_id, seq) FILTER (WHERE provider_job_id <> '') AS provider_job_id
    FROM _lake_events
    GROUP BY ALL
) e ON e.job_key = s.job_key AND e.shard_id = s.shard_id;

CREATE OR REPLACE VIEW _lake_ledger_rows AS
SELECT job_key, tenant, shard_id, seq, state, event_at AS "at", actor, provider_job_id, lease_expires,
       coalesce(CAST(detail AS VARCHAR), 'null') AS detail
FROM _lake_events;

CREATE OR REPLACE VIEW _lake_ingest_rows AS
SELECT job_key, tenant, channel, raw_sha256, provider_job_id, lines, ingested_at
FROM _lake_ingests
WHERE channel IN ('output', 'error');

-- One row per provider batch of a shard: its status until the first event
-- that saw it terminal (.Terminal: providers.TerminalStatuses), and that event's time.
CREATE OR REPLACE VIEW _lake_batch_rows AS
WITH ev AS (
    SELECT job_key, tenant, shard_id, provider_job_id, seq, event_at, coalesce(detail->>'provider_status', '') AS st
    FROM _lake_events
    WHERE provider_job_id <> ''
), term AS (
    SELECT job_key, shard_id, provider_job_id, arg_min(st, seq) AS st, arg_min(event_at, seq) AS completed_at
    FROM ev WHERE st IN {{.Terminal}} GROUP BY ALL
), last AS (
    SELECT job_key, shard_id, provider_job_id, arg_max(st, seq) AS st
    FROM ev WHERE st <> '' GROUP BY ALL
)
SELECT b.job_key, b.tenant, b.shard_id, b.provider_job_id, coalesce(t.st, l.st, '') AS provider_status, t.completed_at
FROM (SELECT DISTINCT job_key, tenant, shard_id, provider_job_id FROM ev) b
LEFT JOIN term t ON t.job_key = b.job_key AND t.shard_id = b.shard_id AND t.provider_job_id = b.provider_job_id
LEFT JOIN last l ON l.job_key = b.job_key AND l.shard_id = b.shard_id AND l.provider_job_id = b.provider_job_id;

-- When each raw file of a job first counted in a committed report.
CREATE OR REPLACE VIEW _lake_report_file_rows AS
SELECT m.job_key, m.tenant, f.raw_sha256, min(f.reconciled_at) AS first_reconciled_at
FROM (
    SELECT body->>'job_key' AS job_key, CAST(body->>'reconciled_at' AS TIMESTAMPTZ) AS reconciled_at,
           unnest(list_concat(coalesce(CAST(body->'files'->'output' AS VARCHAR[]), []),
                              coalesce(CAST(body->'files'->'error' AS VARCHAR[]), []))) AS raw_sha256
    FROM _lake_reports
) f
JOIN _lake_manifests m ON m.job_key = f.job_key
GROUP BY ALL;
