-- The report's jobs, oldest first: what the manifest says (tenant, provider,
-- model, prompt version, plan time), the ledger's times (first SUBMITTED, the
-- last COMPLETED or PARTIAL: the latest reconcile that closed a step), when
-- the provider finished the last of its batches (NULL while any batch is not
-- terminal), every shard's latest ledger state (the job's state is derived
-- from them), and the cost of its priced lines (the costs view, as `cost`).
WITH RECURSIVE {{.Scope}},
times AS (
    SELECT job_key,
           min("at") FILTER (WHERE state = 'SUBMITTED') AS submitted_at,
           max("at") FILTER (WHERE state IN ('COMPLETED', 'PARTIAL')) AS reconciled_at,
           string_agg(state, ',' ORDER BY shard_id) FILTER (WHERE last) AS shard_states
    FROM (SELECT job_key, shard_id, state, "at",
                 row_number() OVER (PARTITION BY job_key, shard_id ORDER BY seq DESC) = 1 AS last
          FROM ledger WHERE job_key IN (SELECT job_key FROM scope))
    GROUP BY job_key
),
done AS (
    SELECT job_key,
           CASE WHEN count(*) FILTER (WHERE completed_at IS NULL) = 0 THEN max(completed_at) END AS completed_at
    FROM batches WHERE job_key IN (SELECT job_key FROM scope)
    GROUP BY job_key
),
cost AS (
    SELECT job_key, count(*) AS lines, CAST(sum(cost_usd) AS VARCHAR) AS cost_usd
    FROM costs WHERE job_key IN (SELECT job_key FROM scope)
    GROUP BY job_key
)
SELECT m.job_key, m.tenant, m.provider, m.model, m.prompt_version, m.attempt, m.parent_job_key,
       m.expected_records, m.created_at, t.submitted_at, d.completed_at, t.reconciled_at,
       coalesce(t.shard_states, ''), coalesce(c.lines, 0), coalesce(c.cost_usd, '0')
FROM manifests m
LEFT JOIN times t ON t.job_key = m.job_key
LEFT JOIN done d ON d.job_key = m.job_key
LEFT JOIN cost c ON c.job_key = m.job_key
WHERE m.job_key IN (SELECT job_key FROM scope)
ORDER BY m.created_at, m.attempt, m.job_key;
