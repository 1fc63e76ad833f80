-- verify's check of one view source of a compaction (reconcile/compact.go):
-- each segment's file may hold no row of a job the marker does not place in
-- that segment ({{.Named}}: file, job_key); it counts the rows that do.
SELECT count(*) AS strays
FROM read_parquet({{.Compacted}}, union_by_name = true, filename = true) r
ANTI JOIN read_parquet({{.Named}}) n ON n.file = r.filename AND n.job_key = r.job_key;
