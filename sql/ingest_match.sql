-- ingest's match check: how many lines of a result file's sample carry a
-- custom_id of each job whose expected-table files are listed. A job's
-- custom_ids are distinct, so a line counts once per job.
SELECT e.job_key, count(*) AS lines
FROM read_parquet({{.Sample}}) s
JOIN (SELECT DISTINCT job_key, custom_id FROM read_parquet({{.Expected}}, union_by_name = true)) e
  ON e.custom_id = s.custom_id
GROUP BY e.job_key
ORDER BY lines DESC, e.job_key
