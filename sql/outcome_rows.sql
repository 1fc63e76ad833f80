-- The outcomes' own columns at positions .Lo <= pos < .Hi (rows of one
-- expected file), in any order: the Go side places each row by its pos,
-- checks that every position comes once, and pairs them with the expected
-- file's rows of the same range (expected_rows.sql), each with its own
-- record (id_hash: a hash of custom_id, as expected_rows.sql's). So the outcomes
-- table is written in the expected files' order without a sort. A merge's
-- outcomes (merge_sources.sql) carry pos too.
SELECT pos, CAST(hash(custom_id) >> 1 AS BIGINT) AS id_hash, outcome, disposition, reason, lines, cost_usd, CAST(truncated AS INTEGER) AS truncated
FROM outcomes
WHERE pos >= {{.Lo}} AND pos < {{.Hi}};
