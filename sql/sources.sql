-- The lake's tables for one DuckDB session, read from explicit lists of
-- committed files (each list starts with an empty file that fixes the schema).

-- The expected rows, each with its place in the job's expected files: pos is
-- the file's number (.ExpectedNos, aligned with .Expected: the file's place
-- in the manifest's list from 1, 0 for the empty file) << 40 | the row's
-- number in its file. outcomes.sql carries it, and the outcomes table is
-- written in its order (tables.go), the order the expected files have.
-- A row's file is found by file_index, its file's place in the list read
-- (from 0): looking its path up among the list's paths cost about 0.06 cpu s
-- per scan of 1M rows, and expected_at is scanned four times.
CREATE OR REPLACE TEMP VIEW expected_at AS
SELECT * EXCLUDE (file_row_number),
       (CAST(list_extract({{.ExpectedNos}}, CAST(file_index AS BIGINT) + 1) AS BIGINT) << 40) | file_row_number AS pos
FROM read_parquet({{.Expected}}, union_by_name = true, file_row_number = true);

CREATE OR REPLACE TEMP VIEW expected AS
SELECT * EXCLUDE (pos) FROM expected_at;

CREATE OR REPLACE TEMP VIEW attempts_raw AS
SELECT * FROM read_parquet({{.Attempts}}, union_by_name = true);

CREATE OR REPLACE TEMP VIEW quarantine AS
SELECT * FROM read_parquet({{.Quarantine}}, union_by_name = true);
