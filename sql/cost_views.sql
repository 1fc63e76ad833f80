-- The views over costed (line_costs.sql, or cost_sort.sql when that sort
-- ran in steps) that the report, the costs table and a partition's files read.
-- Each line with its provider, model version and price model named again
-- (model_prices, by mp_no).
CREATE OR REPLACE TEMP VIEW lines AS
SELECT c.* EXCLUDE (cat, mp_no), p.provider, p.model_version, p.model AS price_model
FROM costed c LEFT JOIN model_prices p ON p.mp_no = c.mp_no;

-- One job, one tenant: constants, not carried through every line.
CREATE OR REPLACE TEMP TABLE job_consts AS
SELECT any_value(job_key) AS job_key, any_value(tenant) AS tenant FROM attempts_raw;

-- Each line with its category's name: a projection of costed alone, so a
-- filtered read of it keeps costed's row order (cost_scan.sql).
CREATE OR REPLACE TEMP VIEW costed_rows AS
SELECT out_no, line_no, record_id, custom_id, attempt, mp_no,
    CASE cat
        WHEN 0 THEN 'unattributed'
        WHEN 1 THEN 'first_success'
        WHEN 2 THEN 'duplicate_submission'
        WHEN 3 THEN 'manual'
        WHEN 4 THEN 'quality_failure'
        WHEN 5 THEN 'retryable_failure'
        ELSE 'permanent_failure'
    END AS category,
    unpriced, cost_usd
FROM costed;

-- The costs table's columns (cost_by_category.sql and a partition's file,
-- partition_write.sql, read them; a merge's view has the same columns).
CREATE OR REPLACE TEMP VIEW line_costs AS
SELECT
    j.job_key, j.tenant, l.record_id, l.custom_id, l.attempt, p.provider, p.model_version,
    f.raw_sha256, l.line_no, f.channel, l.out_no, l.category, p.model AS price_model, l.unpriced, l.cost_usd
FROM costed_rows l
JOIN files f ON f.out_no = l.out_no
LEFT JOIN model_prices p ON p.mp_no = l.mp_no
CROSS JOIN job_consts j;

-- cost_scan.sql, a filtered scan of costed, takes the lines in the order
-- they are stored in (as keep_order.sql sets again before the tables).
SET preserve_insertion_order = true;
