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

-- The cost categories' names by the number costed carries (line_costs.sql).
CREATE OR REPLACE TEMP TABLE cost_categories AS
SELECT CAST(cat AS UTINYINT) AS cat, category
FROM (VALUES (0, 'unattributed'), (1, 'first_success'), (2, 'duplicate_submission'), (3, 'manual'),
             (4, 'quality_failure'), (5, 'retryable_failure'), (6, 'permanent_failure')) t(cat, category);

-- Each line with its category's name. A line's record is named by pos
-- (NULL for a line of no record, which keeps its custom_id).
CREATE OR REPLACE TEMP VIEW costed_rows AS
SELECT c.pos, c.out_no, c.line_no, c.custom_id, c.mp_no, k.category, c.unpriced, c.cost_usd
FROM costed c
JOIN cost_categories k ON k.cat = c.cat;

-- The costs table's columns but the record's, and each line's pos, for
-- cost_by_category.sql (which in a merge reads merge_sources.sql's view of
-- the same name). The costs table itself is written from costed by the Go
-- side.
CREATE OR REPLACE TEMP VIEW line_costs_by AS
SELECT
    j.job_key, j.tenant, l.custom_id, p.provider, p.model_version,
    f.raw_sha256, l.line_no, f.channel, l.out_no, l.category, p.model AS price_model, l.unpriced, l.cost_usd, l.pos
FROM costed_rows l
JOIN files f ON f.out_no = l.out_no
LEFT JOIN model_prices p ON p.mp_no = l.mp_no
CROSS JOIN job_consts j;

-- cost_scan.sql, a filtered scan of costed, takes the lines in the order
-- they are stored in (as keep_order.sql sets again before the tables).
SET preserve_insertion_order = true;
