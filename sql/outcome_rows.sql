-- The outcomes' own columns at positions .Lo <= pos < .Hi (rows of one
-- expected file), in any order: the Go side places each row by its pos,
-- checks that every position comes once, and pairs them with the expected
-- file's rows of the same range, read from the file itself, each with its
-- own record (by custom_id). So the outcomes table is written in the
-- expected files' order without a sort. A merge's outcomes
-- (merge_sources.sql) carry pos too.
SELECT pos, custom_id, outcome, disposition, reason, lines, cost_usd, CAST(truncated AS INTEGER) AS truncated
FROM outcomes
WHERE pos >= {{.Lo}} AND pos < {{.Hi}};
