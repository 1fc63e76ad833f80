-- The report's records in numbers: how many were expected, accepted, retried
-- (needed more than one attempt) and are in the manual queue, and the
-- histogram of attempts per record (the records view's attempts, across every
-- generation).
--
-- The histogram is one aggregate by record_id over the scope's expected rows
-- and every outcome (attempts = max(attempt) over a record's outcomes, as in
-- the records view), not the records view semi-joined to the scope's records:
-- two hash tables of every record_id did not fit in DuckDB's memory limit at
-- 3M records, where one aggregate spills. Whether a record has an accepted
-- result is asked of the outcomes (accepted_records, part_candidates.sql),
-- for every record.
WITH RECURSIVE {{.Scope}},
recs AS (SELECT DISTINCT record_id FROM expected WHERE job_key IN (SELECT job_key FROM scope))
SELECT 'expected' AS k, count(*) AS n FROM recs
UNION ALL
SELECT 'succeeded', count(*) FROM recs WHERE record_id IN ({{template "accepted_records"}})
UNION ALL
SELECT 'retried', count(DISTINCT record_id) FROM expected WHERE job_key IN (SELECT job_key FROM scope) AND attempt > 1
UNION ALL
SELECT 'manual', count(*) FROM manual WHERE record_id IN (SELECT record_id FROM recs)
UNION ALL
SELECT 'attempts=' || CAST(attempts AS VARCHAR), count(*)
FROM (
    SELECT record_id, max(attempt) AS attempts, bool_or(scoped) AS scoped
    FROM (
        SELECT record_id, CAST(NULL AS INTEGER) AS attempt, true AS scoped
        FROM expected WHERE job_key IN (SELECT job_key FROM scope)
        UNION ALL
        SELECT record_id, attempt, false FROM outcomes
    )
    GROUP BY record_id
)
WHERE scoped AND attempts IS NOT NULL
GROUP BY attempts;
