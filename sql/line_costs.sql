-- Every line priced and in its cost category, run once the retry policy has
-- settled the outcomes' dispositions (reconcile.sql, then policy.sql).
--
-- A record's first success is its best line when that line succeeded; its
-- other successes are duplicate submissions. Every line of a record the retry
-- policy gave up on in this job (disposition manual, not failed_permanent:
-- past --max-attempts or a cap) is in the manual category; such a record has
-- no succeeded line, so only failure categories give way and the categories
-- still partition the lines.
--
-- The category is worked out here once, as a small number beside each line,
-- and lines is rebuilt with it: the costs table is read in several ranges
-- (cost_rows.sql) and the report reads the categories again, and each of
-- those reads would otherwise join every line to every outcome anew. Only
-- what is read from here on is kept (the policy has used the tokens).
--
-- Stored in the costs table's row order (out_no, line_no), so that each range
-- cost_rows.sql reads touches only its own row groups (DuckDB keeps each row
-- group's min and max of every column).
SET preserve_insertion_order = true;

CREATE OR REPLACE TEMP TABLE costed AS
SELECT f.out_no, l.line_no, l.record_id, l.custom_id, l.attempt, l.provider, l.model_version,
    l.price_model, l.unpriced, l.cost_usd,
    CAST(CASE
        WHEN l.record_id IS NULL THEN 0
        WHEN l.rank = 1 AND o.best_key = l.line_key THEN 1
        WHEN l.rank = 1 THEN 2
        WHEN o.disposition = 'manual' AND o.outcome <> 'failed_permanent' THEN 3
        WHEN l.rank = 2 THEN 4
        WHEN l.rank = 3 THEN 5
        ELSE 6
    END AS UTINYINT) AS cat
FROM lines l
JOIN files f ON f.file_no = l.file_no
-- outcomes holds only known custom ids
LEFT JOIN outcomes o ON o.custom_id = l.custom_id
ORDER BY f.out_no, l.line_no;

SET preserve_insertion_order = false;

DROP TABLE lines;

CREATE OR REPLACE TEMP VIEW lines AS
SELECT * EXCLUDE (cat) FROM costed;

-- One job, one tenant: constants, not carried through every line.
CREATE OR REPLACE TEMP TABLE job_consts AS
SELECT any_value(job_key) AS job_key, any_value(tenant) AS tenant FROM attempts_raw;

-- The costs table's columns (cost_rows.sql, cost_by_category.sql and a
-- partition's file, partition_write.sql, read them).
CREATE OR REPLACE TEMP VIEW line_costs AS
SELECT
    j.job_key, j.tenant, l.record_id, l.custom_id, l.attempt, l.provider, l.model_version,
    f.raw_sha256, l.line_no, f.channel, l.out_no,
    CASE l.cat
        WHEN 0 THEN 'unattributed'
        WHEN 1 THEN 'first_success'
        WHEN 2 THEN 'duplicate_submission'
        WHEN 3 THEN 'manual'
        WHEN 4 THEN 'quality_failure'
        WHEN 5 THEN 'retryable_failure'
        ELSE 'permanent_failure'
    END AS category,
    l.price_model,
    l.unpriced,
    l.cost_usd
FROM costed l
JOIN files f ON f.out_no = l.out_no
CROSS JOIN job_consts j;

-- outcome_rows.sql, a filtered scan of one table, takes the outcomes in the
-- order they are stored in.
SET preserve_insertion_order = true;
