-- Plan's token estimate of the job (expected rows' est_* columns) and the
-- part of it not billed yet: records with no result line in any channel
-- (outcome missing), whose spend is committed but not reported. expected and
-- outcomes hold the same records (one outcome per expected record, in a
-- partition too), so the totals need no join, and the part not billed joins
-- only the missing records, by their place in the expected files.
SELECT (SELECT coalesce(sum(est_input_tokens), 0)::BIGINT FROM expected) AS input_tokens,
       (SELECT coalesce(sum(est_output_tokens), 0)::BIGINT FROM expected) AS output_tokens,
       count(*) AS not_billed_records,
       coalesce(sum(e.est_input_tokens), 0)::BIGINT AS not_billed_input_tokens,
       coalesce(sum(e.est_output_tokens), 0)::BIGINT AS not_billed_output_tokens
FROM expected_at e
JOIN (SELECT pos FROM outcomes WHERE outcome = 'missing') m ON m.pos = e.pos;
