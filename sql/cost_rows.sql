-- Rows of the costs table: one per result line, in (raw_sha256, channel,
-- line_no) order (out_no numbers the files in that order). The Go side reads
-- them in ranges (cost_ranges.sql): with .Files, files .OutLo..OutHi, and
-- with .Lines, within a single large file lines .LineLo <= line_no < .LineHi,
-- so that no single query materialises and sorts every line. cost_sort.sql
-- stores the lines in this order, so a range reads only its own row groups;
-- it still sorts, as the view's joins do not keep the order. out_no is
-- returned for the Go side to check the order of every row.
SELECT job_key, tenant, coalesce(record_id, '') AS record_id, custom_id, coalesce(attempt, 0) AS attempt,
       provider, model_version, category, raw_sha256, line_no, coalesce(price_model, '') AS price_model,
       CAST(cost_usd AS VARCHAR) AS cost_usd, out_no
FROM line_costs
WHERE true{{if .Files}} AND out_no BETWEEN {{.OutLo}} AND {{.OutHi}}{{end}}{{if .Lines}} AND line_no >= {{.LineLo}} AND line_no < {{.LineHi}}{{end}}
ORDER BY out_no, line_no;
