-- "latest_key": an outcomes row's place among its record's outcomes, the
-- latest the greatest: its attempt above 32 bits of a hash of its job key, so
-- that of two jobs of one attempt the same one is the latest in every query
-- (which one is arbitrary). The records view, the manual view and the report
-- take a record's latest disposition by it, and so agree on it.
{{- define "latest_key"}}((CAST(attempt AS BIGINT) << 32) | CAST(hash(job_key) >> 32 AS BIGINT)){{- end}}
