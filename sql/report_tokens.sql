-- The tokens the providers reported for the report's result lines (every
-- channel), beside plan's estimate: what the bill was computed from. Lines
-- with no record (unknown ids) count too: they are billed. attempts_raw, not
-- the attempts view: these sums need none of its joins.
WITH RECURSIVE {{.Scope}}
SELECT count(*) AS lines,
       count(*) FILTER (WHERE outcome = 'success') AS success_lines,
       coalesce(sum(input_tokens), 0)::BIGINT AS input_tokens,
       coalesce(sum(cached_input_tokens), 0)::BIGINT AS cached_input_tokens,
       coalesce(sum(output_tokens), 0)::BIGINT AS output_tokens,
       (SELECT count(*) FROM costs WHERE job_key IN (SELECT job_key FROM scope) AND coalesce(unpriced, false)) AS unpriced_lines
FROM attempts_raw
WHERE job_key IN (SELECT job_key FROM scope);
