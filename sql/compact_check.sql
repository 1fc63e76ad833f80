-- verify's check of one view source of a compaction (reconcile/compact.go):
-- for the jobs whose markers are unchanged since it ({{.Fresh}}), its rows
-- and the rows read live from their sources must be the same multiset
-- (differing), and each segment's file may hold no row of a job the marker
-- does not place in that segment ({{.Named}}: file, job_key; strays).
WITH c AS (SELECT * FROM read_parquet({{.Compacted}}, union_by_name = true)
           WHERE job_key IN (SELECT job_key FROM read_parquet({{.Fresh}}))),
     v AS (SELECT * FROM read_parquet({{.Live}}, union_by_name = true))
SELECT (SELECT count(*) FROM (SELECT * FROM c EXCEPT ALL SELECT * FROM v))
     + (SELECT count(*) FROM (SELECT * FROM v EXCEPT ALL SELECT * FROM c)) AS differing,
       (SELECT count(*) FROM read_parquet({{.Compacted}}, union_by_name = true, filename = true) r
        ANTI JOIN read_parquet({{.Named}}) n ON n.file = r.filename AND n.job_key = r.job_key) AS strays;
