-- The outcomes table: outcomes_u (outcomes.sql without .Sorted, after its one
-- sorted statement ran out of memory) stored in record_id order,
-- the order outcome_rows.sql reads it in. DuckDB keeps each row group's min
-- and max record_id, so each range that outcome_rows.sql reads touches only
-- its own row groups instead of scanning and filtering the whole table once
-- per range.
--
-- Sorted one range of record ids at a time (.Ranges, from the Go side: they
-- partition the key space in order, see recordRanges), each insert keeping
-- its sorted order: one sort of every row of a 10M-record job does not fit
-- in a 256MB --memory-limit, a million rows at a time does.
SET preserve_insertion_order = true;

CREATE OR REPLACE TEMP TABLE outcomes AS FROM outcomes_u LIMIT 0;
{{range .Ranges}}
INSERT INTO outcomes
SELECT * FROM outcomes_u
WHERE true{{if .Lo}} AND record_id >= '{{.Lo}}'{{end}}{{if .Hi}} AND record_id < '{{.Hi}}'{{end}}
ORDER BY record_id;
{{end}}
DROP TABLE outcomes_u;

SET preserve_insertion_order = false;
