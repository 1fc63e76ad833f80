-- Rows of a merge's costs table (a reconcile reads cost_scan.sql): one per
-- result line, in (raw_sha256, channel, line_no) order (out_no numbers the
-- files in that order over all the partitions' lines), one range of
-- cost_ranges.sql at a time, sorted: with .Files, files .OutLo..OutHi, and
-- with .Lines, within a single large file lines .LineLo <= line_no < .LineHi.
-- out_no is returned for the Go side to check the order of every row.
SELECT job_key, tenant, coalesce(record_id, '') AS record_id, custom_id, coalesce(attempt, 0) AS attempt,
       provider, model_version, category, raw_sha256, line_no, coalesce(price_model, '') AS price_model,
       cost_usd, out_no, CAST(coalesce(unpriced, false) AS INTEGER) AS unpriced
FROM line_costs
WHERE true{{if .Files}} AND out_no BETWEEN {{.OutLo}} AND {{.OutHi}}{{end}}{{if .Lines}} AND line_no >= {{.LineLo}} AND line_no < {{.LineHi}}{{end}}
ORDER BY out_no, line_no;
