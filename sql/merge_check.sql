-- reconcile --merge: do the partitions cover every record and every line
-- exactly once? One row.
SELECT
    (SELECT count(*) FROM expected) AS expected,
    (SELECT count(*) FROM outcomes) AS outcomes,
    (SELECT count(DISTINCT record_id) FROM outcomes) AS outcome_records,
    (SELECT count(*) FROM outcomes o SEMI JOIN expected e ON e.record_id = o.record_id) AS known_outcomes,
    (SELECT count(*) FROM line_costs) AS lines,
    (SELECT count(DISTINCT (channel, raw_sha256, line_no)) FROM line_costs) AS distinct_lines;
