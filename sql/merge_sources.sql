-- reconcile --merge: the tables that report.sql, cost_by_category.sql,
-- outcome_rows.sql, cost_rows.sql and retry_set.sql read, made of the
-- partitions' outcomes and line_costs instead of classified anew. expected
-- and quarantine are the job's own, as in sources.sql.
CREATE OR REPLACE TEMP VIEW expected AS
SELECT * FROM read_parquet({{.Expected}}, union_by_name = true);

-- Each expected row with its place in the job's expected files, as
-- sources.sql numbers them (.Expected is the manifest's list, after the
-- empty file that fixes the schema): the partitions' outcomes carry it, and
-- retry_rows.sql joins by it.
CREATE OR REPLACE TEMP VIEW expected_at AS
SELECT * EXCLUDE (file_row_number),
       (CAST(file_index AS BIGINT) << 40) | file_row_number AS pos
FROM read_parquet({{.Expected}}, union_by_name = true, file_row_number = true);

-- Every ingested line, for the provider totals cross-check (provider_totals.sql).
CREATE OR REPLACE TEMP VIEW attempts_raw AS
SELECT * FROM read_parquet({{.Attempts}}, union_by_name = true);

CREATE OR REPLACE TEMP VIEW quarantine AS
SELECT * FROM read_parquet({{.Quarantine}}, union_by_name = true);

CREATE OR REPLACE TEMP VIEW outcomes AS
SELECT * FROM read_parquet({{.Outcomes}}, union_by_name = true);

-- A partition numbers only the files it has lines of: out_no (the costs
-- table's file order, cost_rows.sql) is numbered again over all of them.
-- The numbering is of the few distinct files, joined back to the lines: a
-- window over every line would hold them all in memory at once.
CREATE OR REPLACE TEMP VIEW partial_costs AS
SELECT * FROM read_parquet({{.Costs}}, union_by_name = true);

CREATE OR REPLACE TEMP TABLE merge_files AS
SELECT raw_sha256, channel, CAST(row_number() OVER (ORDER BY raw_sha256, channel) AS INTEGER) AS out_no
FROM (SELECT DISTINCT raw_sha256, channel FROM partial_costs);

CREATE OR REPLACE TEMP VIEW line_costs AS
SELECT c.* EXCLUDE (out_no), f.out_no
FROM partial_costs c
JOIN merge_files f
  ON f.raw_sha256 IS NOT DISTINCT FROM c.raw_sha256 AND f.channel IS NOT DISTINCT FROM c.channel;

CREATE OR REPLACE TEMP VIEW line_costs_by AS
SELECT * FROM line_costs;

CREATE OR REPLACE TEMP VIEW lines AS
SELECT * FROM line_costs;
