-- The report's records in numbers: how many were expected, accepted, retried
-- (needed more than one attempt) and are in the manual queue, and the
-- histogram of attempts per record (records view, across every generation).
WITH RECURSIVE {{.Scope}},
recs AS (SELECT DISTINCT record_id FROM expected WHERE job_key IN (SELECT job_key FROM scope))
SELECT 'expected' AS k, count(*) AS n FROM recs
UNION ALL
SELECT 'succeeded', count(*) FROM accepted WHERE record_id IN (SELECT record_id FROM recs)
UNION ALL
SELECT 'retried', count(DISTINCT record_id) FROM expected WHERE job_key IN (SELECT job_key FROM scope) AND attempt > 1
UNION ALL
SELECT 'manual', count(*) FROM manual WHERE record_id IN (SELECT record_id FROM recs)
UNION ALL
SELECT 'attempts=' || CAST(attempts AS VARCHAR), count(*) FROM records WHERE record_id IN (SELECT record_id FROM recs) GROUP BY attempts;
