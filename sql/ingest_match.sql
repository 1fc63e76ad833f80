-- ingest's match check: how many lines of each result file's sample (sample
-- is the file's number) carry a custom_id of each job whose expected-table
-- files are listed; the samples share one read of those files. A job's
-- custom_ids are distinct, so a line counts once per job. The expected rows
-- are first narrowed to the samples' ids (a semi-join whose hash table holds
-- only the samples), so memory follows the samples, not the jobs' size: a
-- DISTINCT over every expected row held all of a job's custom_ids at once.
WITH sample AS (
  SELECT sample, custom_id FROM read_parquet({{.Sample}})
), hits AS (
  SELECT DISTINCT job_key, custom_id
  FROM read_parquet({{.Expected}}, union_by_name = true)
  WHERE custom_id IN (SELECT custom_id FROM sample)
)
SELECT s.sample, h.job_key, count(*) AS lines
FROM sample s
JOIN hits h ON h.custom_id = s.custom_id
GROUP BY s.sample, h.job_key
ORDER BY s.sample, lines DESC, h.job_key
