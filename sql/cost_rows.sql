-- Rows of a merge's costs table (a reconcile reads cost_scan.sql): one per
-- result line, in the costs table's order (line_costs.sql: by the record's
-- pos, then (raw_sha256, channel, line_no), which out_no numbers over all
-- the partitions' lines; lines of no record last), one range of
-- cost_ranges.sql at a time, sorted. pos and out_no are returned for the Go
-- side to check the order of every row.
SELECT job_key, tenant, coalesce(record_id, '') AS record_id, custom_id, coalesce(attempt, 0) AS attempt,
       provider, model_version, category, raw_sha256, line_no, coalesce(price_model, '') AS price_model,
       cost_usd, out_no, CAST(coalesce(unpriced, false) AS INTEGER) AS unpriced, coalesce(pos, -1) AS pos
FROM line_costs
WHERE true{{if .Known}} AND pos >= {{.PosLo}} AND pos < {{.PosHi}}{{end}}{{if .Unknown}} AND pos IS NULL{{end}}
{{- if .Files}} AND out_no BETWEEN {{.OutLo}} AND {{.OutHi}}{{end}}{{if .Lines}} AND line_no >= {{.LineLo}} AND line_no < {{.LineHi}}{{end}}
ORDER BY pos NULLS LAST, out_no, line_no;
