-- The costs table's lines per result file, in out_no order: how many and
-- their line number span. The Go side cuts cost_rows.sql into ranges from it.
SELECT out_no, count(*) AS n, min(line_no) AS first_line, max(line_no) AS last_line
FROM lines
GROUP BY out_no
ORDER BY out_no;
