-- Each expected record's outcome (run after reconcile.sql, which builds best).
SET preserve_insertion_order = false;

-- One row per expected record: its best line (if any), how many lines it had
-- and their cost, and its place in the expected files (pos, sources.sql).
-- Stored unsorted: the outcomes table is written in pos order from two
-- reads that need no sort of these wide rows (tables.go): the narrow columns
-- from here a range of pos at a time (outcome_rows.sql), the wide ones from
-- the expected files, which hold their rows in that order (read by the Go
-- side). Of the record's own columns only those the other
-- statements join or decide by are kept, and no record_id: 64 characters a
-- record, which at 10M records spilled (the retry, the estimate, the retry
-- policy and a partition's partial table take it, or what else they need,
-- from the expected files by pos); job_key and tenant, the same on every
-- row, are left to the readers. A large job's records come a group of buckets at a time
-- (lines.sql): the first group creates the table, each later one (.Insert)
-- adds its rows.
{{if .Insert}}INSERT INTO outcomes BY NAME{{else}}CREATE OR REPLACE TEMP TABLE outcomes AS{{end}}
WITH o AS (
    SELECT e.custom_id, e.attempt, e.pos,
           CAST(b.line_key >> 59 AS UTINYINT) AS rank,
           d.error_code AS error_code, d.status_code AS status_code,
           coalesce(d.truncated, false) AS truncated,
           coalesce(d.schema_failed, false) AS schema_failed,
           coalesce(b.lines, 0) AS lines,
           coalesce(b.cost_usd, CAST(0 AS DECIMAL(38, 18))) AS cost_usd
    FROM expected_at e
    LEFT JOIN best b ON b.pos = e.pos
    -- The best line's details, where the outcome uses them: a line that
    -- succeeded and was not cut needs none (the most lines by far, and so
    -- the smallest join).
    LEFT JOIN (SELECT line_key, error_code, status_code, truncated, schema_failed
               FROM lines WHERE grp = {{.Group}} AND (rank > 1 OR truncated)) d ON d.line_key = b.line_key
)
SELECT
    custom_id, attempt,
    CASE rank WHEN 1 THEN 'succeeded' WHEN 2 THEN 'quality_failed' WHEN 3 THEN 'failed_retryable'
              WHEN 4 THEN 'failed_permanent' ELSE 'missing' END AS outcome,
    CASE
        WHEN rank IS NULL THEN 'missing'
        WHEN rank = 2 AND truncated THEN 'truncated'
        WHEN rank = 2 AND schema_failed THEN 'schema'
        WHEN rank = 2 THEN 'quality_gate'
        WHEN rank = 1 THEN ''
        ELSE coalesce(nullif(error_code, ''), 'http_' || CAST(status_code AS VARCHAR), 'unknown_error')
    END AS reason,
    lines,
    CASE
        WHEN rank = 1 THEN 'accepted'
        WHEN (rank IS NULL OR rank IN (2, 3)) AND attempt < {{.MaxAttempts}} THEN 'retry'
        ELSE 'manual'
    END AS disposition,
    cost_usd,
    truncated,
    pos
FROM o;

-- best was only the way to outcomes: free its memory for the statements and
-- table reads that follow.
DROP TABLE best;
