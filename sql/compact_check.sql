-- verify's check of one view source of a compaction (reconcile/compact.go),
-- for a batch of the jobs whose markers are unchanged since it ({{.Fresh}}):
-- the compaction's rows of those jobs and the rows read live from their
-- sources (a table expression: reconcile/compact.go's compactScan) must be
-- the same multiset; it counts the rows that differ. EXCEPT compares columns
-- by position, so the live rows are put in the compaction's column order.
WITH c AS (SELECT * FROM read_parquet({{.Compacted}}, union_by_name = true)
           WHERE job_key IN (SELECT job_key FROM read_parquet({{.Fresh}}))),
     v AS ((SELECT * FROM c LIMIT 0) UNION ALL BY NAME (SELECT * FROM {{.Live}}))
SELECT (SELECT count(*) FROM (SELECT * FROM c EXCEPT ALL SELECT * FROM v))
     + (SELECT count(*) FROM (SELECT * FROM v EXCEPT ALL SELECT * FROM c)) AS differing;
