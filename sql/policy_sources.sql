-- The job's ancestors (parent_job_key, recursively) for the per-record caps:
-- the cost rows of each ancestor's latest reconcile and the attempt rows they
-- price, read from explicit lists of committed files.
CREATE OR REPLACE TEMP VIEW prior_costs AS
SELECT * FROM read_parquet({{.Costs}}, union_by_name = true);

CREATE OR REPLACE TEMP VIEW prior_attempts AS
SELECT * FROM read_parquet({{.Attempts}}, union_by_name = true);
