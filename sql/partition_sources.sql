-- The sources of reconcile --partition {{.K}}/{{.N}}: sources.sql restricted to
-- the records whose record_id falls in partition {{.K}} of {{.N}} and to their
-- result lines (joined by custom_id, as reconcile.sql joins them). A line whose
-- custom_id is no record of the job (an unknown id) falls in the partition of
-- the sha256 of its custom_id, so each unknown id counts in exactly one
-- partition. The partition of a hex digest h is
--     uint32(first 8 hex digits of h) mod n
-- (lake/partition.go; the same in Go, Spark and Trino, see docs/engines.md).
CREATE OR REPLACE TEMP VIEW expected_all AS
SELECT * FROM read_parquet({{.Expected}}, union_by_name = true);

CREATE OR REPLACE TEMP VIEW expected AS
SELECT * FROM expected_all
WHERE CAST(('0x' || substr(record_id, 1, 8)) AS UBIGINT) % {{.N}} = {{.K}};

CREATE OR REPLACE TEMP VIEW attempts_raw AS
SELECT a.*
FROM read_parquet({{.Attempts}}, union_by_name = true) a
LEFT JOIN (SELECT custom_id, record_id FROM expected_all) e
       ON e.custom_id = a.custom_id
WHERE CAST(('0x' || substr(coalesce(e.record_id, sha256(a.custom_id)), 1, 8)) AS UBIGINT) % {{.N}} = {{.K}};

-- Quarantined lines have no trustworthy id: partition 0 counts them all.
CREATE OR REPLACE TEMP VIEW quarantine AS
SELECT * FROM read_parquet({{.Quarantine}}, union_by_name = true)
WHERE {{.K}} = 0;
