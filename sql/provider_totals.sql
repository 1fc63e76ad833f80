-- What the job's ingested result lines add up to, per provider batch id
-- (every line, unknown ids included: the provider counts them too).
SELECT coalesce(provider_job_id, '') AS provider_job_id,
       coalesce(sum(input_tokens), 0)::BIGINT AS input_tokens,
       coalesce(sum(cached_input_tokens), 0)::BIGINT AS cached_input_tokens,
       coalesce(sum(output_tokens), 0)::BIGINT AS output_tokens
FROM attempts_raw
GROUP BY ALL
ORDER BY provider_job_id;
