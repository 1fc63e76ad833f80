-- The outcomes of each expected file (file_no = pos >> 40, sources.sql):
-- how many, and their least and greatest row number, in file order. The Go
-- side cuts outcome_rows.sql's ranges from them and reads each file's rows.
SELECT pos >> 40 AS file_no, count(*) AS n, min(pos & 1099511627775) AS first_row, max(pos & 1099511627775) AS last_row
FROM outcomes
GROUP BY ALL
ORDER BY file_no;
