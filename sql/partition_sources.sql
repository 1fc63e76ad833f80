-- The sources of reconcile --partition {{.K}}/{{.N}}: sources.sql restricted to
-- the records and result lines whose custom_id falls in partition {{.K}} of
-- {{.N}} (a line and its record share their custom_id, so a record comes with
-- its lines; a line of an unknown id falls in one partition all the same).
-- The partition of a custom_id is
--     floor(uint32(first 8 hex digits of sha256(custom_id)) * n / 2^32)
-- (lake/partition.go; the same in Go, Spark and Trino, see docs/engines.md).
-- Each table comes in two lists of files: those whose rows are all the
-- partition's (files of a split table whose bucket lies inside it: read
-- whole), and those read through the filter (files of an unsplit table, or
-- of a bucket that straddles partitions). Files of buckets outside the
-- partition are in neither list: they are not read at all.
-- expected_at: sources.sql's, each row's pos numbering the files of the
-- whole job's list (.ExpectedNos, .ExpectedPartNos), so that the partitions'
-- outcomes merge in one order.
CREATE OR REPLACE TEMP VIEW expected_at AS
SELECT * EXCLUDE (file_row_number),
       (CAST(list_extract({{.ExpectedNos}}, CAST(file_index AS BIGINT) + 1) AS BIGINT) << 40) | file_row_number AS pos
FROM read_parquet({{.Expected}}, union_by_name = true, file_row_number = true)
UNION ALL BY NAME
SELECT * EXCLUDE (file_row_number),
       (CAST(list_extract({{.ExpectedPartNos}}, CAST(file_index AS BIGINT) + 1) AS BIGINT) << 40) | file_row_number AS pos
FROM read_parquet({{.ExpectedPart}}, union_by_name = true, file_row_number = true)
WHERE (CAST(('0x' || substr(sha256(custom_id), 1, 8)) AS UBIGINT) * {{.N}}) // 4294967296 = {{.K}};

CREATE OR REPLACE TEMP VIEW expected AS
SELECT * EXCLUDE (pos) FROM expected_at;

CREATE OR REPLACE TEMP VIEW attempts_raw AS
SELECT * FROM read_parquet({{.Attempts}}, union_by_name = true)
UNION ALL BY NAME
SELECT * FROM read_parquet({{.AttemptsPart}}, union_by_name = true)
WHERE (CAST(('0x' || substr(sha256(custom_id), 1, 8)) AS UBIGINT) * {{.N}}) // 4294967296 = {{.K}};

-- Quarantined lines have no trustworthy id: partition 0 counts them all (the
-- other partitions are given no quarantine file).
CREATE OR REPLACE TEMP VIEW quarantine AS
SELECT * FROM read_parquet({{.Quarantine}}, union_by_name = true);
