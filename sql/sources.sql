-- The lake's tables for one DuckDB session, read from explicit lists of
-- committed files (each list starts with an empty file that fixes the schema).
CREATE OR REPLACE TEMP VIEW expected AS
SELECT * FROM read_parquet({{.Expected}}, union_by_name = true);

CREATE OR REPLACE TEMP VIEW attempts_raw AS
SELECT * FROM read_parquet({{.Attempts}}, union_by_name = true);

CREATE OR REPLACE TEMP VIEW quarantine AS
SELECT * FROM read_parquet({{.Quarantine}}, union_by_name = true);
