-- Plan's token estimate of the job (expected rows' est_* columns) and the
-- part of it not billed yet: records with no result line in any channel
-- (outcome missing), whose spend is committed but not reported.
SELECT coalesce(sum(e.est_input_tokens), 0)::BIGINT AS input_tokens,
       coalesce(sum(e.est_output_tokens), 0)::BIGINT AS output_tokens,
       count(*) FILTER (WHERE o.outcome = 'missing') AS not_billed_records,
       coalesce(sum(e.est_input_tokens) FILTER (WHERE o.outcome = 'missing'), 0)::BIGINT AS not_billed_input_tokens,
       coalesce(sum(e.est_output_tokens) FILTER (WHERE o.outcome = 'missing'), 0)::BIGINT AS not_billed_output_tokens
FROM expected e
JOIN outcomes o ON o.record_id = e.record_id;
