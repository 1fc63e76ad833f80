-- Rows of the outcomes table, with each record's cost in this job, in
-- record_id order. The Go side reads them in record_id ranges (.Lo, .Hi:
-- hex prefixes it generates; "" is unbounded) so that no single query
-- materialises every row; the ranges partition the key space, so their
-- results concatenate to the order of one ORDER BY record_id. outcome_sort.sql
-- stores the table in that order and the scan keeps it (preserve insertion
-- order), so only a merge, whose table is the partitions' files, sorts
-- (.Sort); the Go side checks the order of every row. job_key and tenant, the
-- same on every row, come from the manifest instead.
SELECT record_id, business_key, shard_id, custom_id, attempt,
       parent_job_key, outcome, disposition, reason, lines,
       cost_usd, CAST(truncated AS INTEGER) AS truncated
FROM outcomes
WHERE true{{if .Lo}} AND record_id >= '{{.Lo}}'{{end}}{{if .Hi}} AND record_id < '{{.Hi}}'{{end}}
{{- if .Sort}}
ORDER BY record_id{{end}};
