-- The report's records in numbers: how many were expected, accepted, retried
-- (needed more than one attempt) and are in the manual queue, and the
-- histogram of attempts per record (the records view's attempts, across every
-- generation).
--
-- Every number but the retried comes from one aggregate by record_id over
-- every outcome, and the expected rows of the scope's jobs not reconciled
-- yet: a reconciled job's outcomes hold one row for each of its expected
-- records (outcomes.sql), so its expected rows would only add a second row
-- per record. The aggregate gives whether the record is the scope's, its
-- attempts (max(attempt) over its outcomes, as in the records view), whether
-- it has an accepted result (a succeeded outcome: accepted_outcome,
-- part_candidates.sql) and whether its latest disposition (by latest_key,
-- part_latest.sql, as in the manual view: the records whose latest
-- disposition is manual and that have no accepted result) is manual, a
-- boolean (an aggregate's strings are held outside DuckDB's memory limit);
-- then the records are counted by attempts. Each further set or aggregate of
-- every record_id (the scope's records, a semi-join for the accepted ones,
-- the manual view's latest dispositions) cost as much again: at 10M records
-- the statement took 25-28 s with those. Two hash tables of every record_id
-- also did not fit in DuckDB's memory limit at 3M records, where one
-- aggregate spills.
WITH RECURSIVE {{.Scope}},
per AS (
    SELECT record_id, max(attempt) AS attempts, bool_or(scoped) AS scoped, bool_or(accepted) AS accepted,
           arg_max(manual, latest_key) AS manual
    FROM (
        SELECT record_id, CAST(NULL AS INTEGER) AS attempt, true AS scoped, false AS accepted,
               CAST(NULL AS BOOLEAN) AS manual, CAST(NULL AS BIGINT) AS latest_key
        FROM expected
        WHERE job_key IN (SELECT job_key FROM scope)
          AND job_key NOT IN (SELECT DISTINCT job_key FROM outcomes WHERE job_key IS NOT NULL)
        UNION ALL
        SELECT record_id, attempt, job_key IN (SELECT job_key FROM scope), {{template "accepted_outcome"}},
               disposition = 'manual', {{template "latest_key"}}
        FROM outcomes
    )
    GROUP BY record_id
),
-- One row per number of attempts (NULL: no outcome yet), the only reader of
-- per, materialised so that per is aggregated once.
by_attempts AS MATERIALIZED (
    SELECT attempts, count(*) AS n, count(*) FILTER (WHERE accepted) AS accepted,
           count(*) FILTER (WHERE manual AND NOT accepted) AS manual
    FROM per
    WHERE scoped
    GROUP BY attempts
)
SELECT 'expected' AS k, CAST(coalesce(sum(n), 0) AS BIGINT) AS n FROM by_attempts
UNION ALL
SELECT 'succeeded', CAST(coalesce(sum(accepted), 0) AS BIGINT) FROM by_attempts
UNION ALL
SELECT 'retried', count(DISTINCT record_id) FROM expected WHERE job_key IN (SELECT job_key FROM scope) AND attempt > 1
UNION ALL
SELECT 'manual', CAST(coalesce(sum(manual), 0) AS BIGINT) FROM by_attempts
UNION ALL
SELECT 'attempts=' || CAST(attempts AS VARCHAR), n FROM by_attempts WHERE attempts IS NOT NULL;
