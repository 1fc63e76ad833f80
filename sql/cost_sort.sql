-- The costed table: costed_u (line_costs.sql without .Sorted) stored in the
-- costs table's row order (by pos, then (out_no, line_no); lines of no record
-- last), sorted one range of cost_ranges.sql at a time (.Ranges, over
-- costed_u): one sort of every line of a 10M-record job did not fit in a
-- 256MB --memory-limit, a million lines at a time does (sort.go).
SET preserve_insertion_order = true;

CREATE OR REPLACE TEMP TABLE costed AS FROM costed_u LIMIT 0;
{{range .Ranges}}
INSERT INTO costed
SELECT * FROM costed_u
WHERE true{{if .Known}} AND pos >= {{.PosLo}} AND pos < {{.PosHi}}{{end}}{{if .Unknown}} AND pos IS NULL{{end}}
{{- if .Files}} AND out_no BETWEEN {{.OutLo}} AND {{.OutHi}}{{end}}{{if .Lines}} AND line_no >= {{.LineLo}} AND line_no < {{.LineHi}}{{end}}
ORDER BY pos NULLS LAST, out_no, line_no;
{{end}}
DROP TABLE costed_u;

SET preserve_insertion_order = false;
