-- "settled": the records that have an accepted result (the accepted view's
-- records), for the manual view and the report to include with
-- {{template "settled" "rel"}}: only the records of relation rel (a CTE with
-- a record_id column), or every record with "". Whether a record has an
-- accepted result needs the accepted view's candidates only, not which of
-- them wins (its ordering) nor its columns; and the lines themselves
-- (attempts_raw) stand in for the attempts view, whose record_id comes from
-- the job's expected rows by custom_id just as the costs' record_id does.
-- rel comes first in the joins, so that a small one (the manual view's
-- candidates) keeps DuckDB from joining every line of the lake. Every two of
-- the three tables share a key finer than the job (custom_id), whichever
-- order DuckDB joins them in: lines and outcomes joined by job alone would
-- pair every line of a job with every record.
{{- define "settled"}}
    SELECT c.record_id
    FROM {{if .}}{{.}} k JOIN costs c ON c.record_id = k.record_id{{else}}costs c{{end}}
    JOIN outcomes o ON o.job_key = c.job_key AND o.record_id = c.record_id AND o.custom_id = c.custom_id
                   AND o.outcome = 'succeeded'
    JOIN attempts_raw a ON a.job_key = c.job_key AND a.raw_sha256 = c.raw_sha256 AND a.line_no = c.line_no
                       AND a.custom_id = c.custom_id AND a.outcome = 'success'
    WHERE c.category IN ('first_success', 'duplicate_submission')
{{- end}}
