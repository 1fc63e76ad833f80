-- The costs table's lines per result file, in out_no order: how many and
-- their line number span. The Go side cuts cost_rows.sql into ranges from it.
SELECT f.out_no, count(*) AS n, min(l.line_no) AS first_line, max(l.line_no) AS last_line
FROM lines l
JOIN files f ON f.file_no = l.file_no
GROUP BY f.out_no
ORDER BY f.out_no;
