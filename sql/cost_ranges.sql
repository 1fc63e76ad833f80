-- The costs table's lines per result file, in out_no order: how many and
-- their line number span. The Go side cuts cost_sort.sql and cost_scan.sql
-- into ranges from it (.Table: costed_u, then costed).
SELECT out_no, count(*) AS n, min(line_no) AS first_line, max(line_no) AS last_line
FROM {{.Table}}
GROUP BY out_no
ORDER BY out_no;
