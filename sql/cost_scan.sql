-- Rows of the costs table of a reconcile (a merge reads cost_rows.sql): one
-- per result line, in the costs table's order (line_costs.sql), the order
-- costed is stored in. A filtered read of costed alone keeps that order
-- (preserve insertion order), so unlike cost_rows.sql no range joins, no
-- sorts but of the few lines of no record, and only numbers but an unknown
-- line's custom_id. The Go side fills
-- in the rest: each line's record (record_id, custom_id, attempt) from the
-- expected file's row at its pos, the category's name from cat
-- (cost_categories.sql), job_key and tenant from the manifest, raw_sha256
-- from out_no (cost_files.sql), the provider, model version and price model
-- from mp_no (cost_models.sql); and it checks the order of every row. The
-- ranges come from cost_ranges.sql (chunks.go): with .Known, the lines of the
-- records at .PosLo <= pos < .PosHi; with .Unknown, lines of no record, with
-- .Files of files .OutLo..OutHi, and with .Lines, within a single large file,
-- lines .LineLo <= line_no < .LineHi; so that no single query materialises
-- every line.
SELECT coalesce(pos, -1) AS pos, cat, line_no, cost_usd, out_no, CAST(coalesce(unpriced, false) AS INTEGER) AS unpriced, mp_no
{{- if .Unknown}}, custom_id{{end}}
FROM costed
WHERE true{{if .Known}} AND pos >= {{.PosLo}} AND pos < {{.PosHi}}{{end}}{{if .Unknown}} AND pos IS NULL{{end}}
{{- if .Files}} AND out_no BETWEEN {{.OutLo}} AND {{.OutHi}}{{end}}{{if .Lines}} AND line_no >= {{.LineLo}} AND line_no < {{.LineHi}}{{end}}
{{- if .Unknown}}
-- costed sorted a group at a time holds each group's lines of no record
-- apart (line_costs.sql): few, sorted together here.
ORDER BY out_no, line_no
{{- end}};
