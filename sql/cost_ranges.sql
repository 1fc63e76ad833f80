-- The lines of .Table (costed_u, then costed; line_costs in a merge) per
-- part of the costs table's order, in that order: the lines of expected
-- records per expected file (part: the file's number, first and last: the
-- least and greatest row of it with a line), then the lines of no record per
-- result file (part: out_no, first and last: line numbers). The Go side cuts
-- cost_sort.sql, cost_scan.sql and cost_rows.sql into ranges from it.
SELECT pos IS NULL AS unknown,
       CASE WHEN pos IS NULL THEN out_no ELSE pos >> 40 END AS part,
       count(*) AS n,
       min(CASE WHEN pos IS NULL THEN line_no ELSE pos & 1099511627775 END) AS first_line,
       max(CASE WHEN pos IS NULL THEN line_no ELSE pos & 1099511627775 END) AS last_line
FROM {{.Table}}
GROUP BY ALL
ORDER BY unknown, part;
