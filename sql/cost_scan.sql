-- Rows of the costs table of a reconcile (a merge reads cost_rows.sql): one
-- per result line, in (raw_sha256, channel, line_no) order, the order
-- cost_sort.sql stores costed in. A filtered read of costed alone keeps that
-- order (preserve insertion order), so unlike cost_rows.sql no range joins or
-- sorts; the Go side fills in what is the same on many rows (job_key and
-- tenant from the manifest, raw_sha256 from out_no: cost_files.sql, the
-- provider, model version and price model from mp_no: cost_models.sql) and
-- checks the order of every row. The ranges come from cost_ranges.sql: with .Files,
-- files .OutLo..OutHi, and with .Lines, within a single large file lines
-- .LineLo <= line_no < .LineHi, so that no single query materialises every line.
SELECT coalesce(record_id, '') AS record_id, custom_id, coalesce(attempt, 0) AS attempt,
       category, line_no, cost_usd, out_no, CAST(coalesce(unpriced, false) AS INTEGER) AS unpriced, mp_no
FROM costed_rows
WHERE true{{if .Files}} AND out_no BETWEEN {{.OutLo}} AND {{.OutHi}}{{end}}{{if .Lines}} AND line_no >= {{.LineLo}} AND line_no < {{.LineHi}}{{end}};
