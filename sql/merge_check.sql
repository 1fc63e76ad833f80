-- reconcile --merge: do the partitions cover every record and every line
-- exactly once? One row. A record is named by its place in the expected
-- files (pos, which each partition paired with the record's row there, by
-- position and custom_id, and which the merge pairs again as it writes the
-- outcomes table), so the check reads no record strings: as many outcomes as
-- records, and every record with one, is every record exactly once. A line
-- is named by its file and line number, as the partitions stored them
-- (line_costs would join every line to its file's number first).
SELECT
    (SELECT count(*) FROM expected) AS expected,
    (SELECT count(*) FROM outcomes) AS outcomes,
    (SELECT count(*) FROM (SELECT pos FROM expected_at) e SEMI JOIN outcomes o ON o.pos = e.pos) AS covered,
    (SELECT count(*) FROM partial_costs) AS lines,
    (SELECT count(DISTINCT (channel, raw_sha256, line_no)) FROM partial_costs) AS distinct_lines;
