-- "candidate_lines": the FROM clause of the lines that may be a record's
-- accepted result: a gate-passing success (priced first_success or
-- duplicate_submission) in a job whose outcome for the record is succeeded.
-- The accepted view picks one of them per record. A line's record and attempt
-- are its costs row's (the job's expected row of its custom_id, as the
-- attempts view would give), so the lines are read as they are stored
-- (attempts_raw), without the attempts view's joins. Every two of the three
-- tables share a key finer than the job (custom_id), whichever order DuckDB
-- joins them in: lines and outcomes joined by job alone would pair every line
-- of a job with every record.
{{- define "candidate_lines"}}
FROM costs c
JOIN outcomes o ON o.job_key = c.job_key AND o.record_id = c.record_id AND o.custom_id = c.custom_id
               AND o.outcome = 'succeeded' AND c.category IN ('first_success', 'duplicate_submission')
JOIN attempts_raw a ON a.job_key = c.job_key AND a.raw_sha256 = c.raw_sha256 AND a.line_no = c.line_no
                   AND a.custom_id = c.custom_id AND a.outcome = 'success'
{{- end}}

-- "accepted_outcome": the condition on an outcomes row under which its
-- record has an accepted result, for the manual view and the report, which
-- only ask whether a record has a candidate line at all: answered from the
-- outcomes alone. In a job whose outcome for a record is succeeded, the
-- record's best line passed the gate, the reconcile priced it first_success
-- (line_costs.sql) and it is a success in the attempts: a candidate line. And
-- every candidate line is in a job whose outcome for its record is
-- succeeded. So a record has a candidate line exactly when some job's
-- outcome for it is succeeded, and the question needs no join of every line
-- of the lake to its costs and attempts rows.
{{- define "accepted_outcome"}}outcome = 'succeeded'{{- end}}
