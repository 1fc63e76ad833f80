-- The lake's public views (CONTRACT §5) over explicit lists of committed files.
-- {{.Kind}} is TEMP VIEW for a session, VIEW for a catalog database.
CREATE OR REPLACE {{.Kind}} expected AS
SELECT * FROM read_parquet({{.Expected}}, union_by_name = true);

CREATE OR REPLACE {{.Kind}} attempts_raw AS
SELECT * FROM read_parquet({{.Attempts}}, union_by_name = true);

CREATE OR REPLACE {{.Kind}} attempts AS
SELECT a.job_key, a.tenant, e.shard_id, a.provider, a.provider_job_id, a.provider_request_id, a.custom_id,
       e.record_id, e.attempt, a.channel, a.raw_sha256, a.line_no, a.status_code, a.outcome, a.error_code,
       a.error_type, a.error_message, a.model_version, a.input_tokens, a.cached_input_tokens, a.cache_write_tokens,
       a.output_tokens, a.reasoning_tokens, a.finish_reason, a.response_status, a.has_output, a.output_text, a.tool_calls
FROM attempts_raw a
LEFT JOIN expected e ON e.job_key = a.job_key AND e.custom_id = a.custom_id;

CREATE OR REPLACE {{.Kind}} quarantine AS
SELECT * FROM read_parquet({{.Quarantine}}, union_by_name = true);

CREATE OR REPLACE {{.Kind}} outcomes AS
SELECT * FROM read_parquet({{.Outcomes}}, union_by_name = true);

CREATE OR REPLACE {{.Kind}} costs AS
SELECT * REPLACE (CAST(cost_usd AS DECIMAL(38, 18)) AS cost_usd)
FROM read_parquet({{.Costs}}, union_by_name = true);

-- Each record's latest state across every generation of retries.
CREATE OR REPLACE {{.Kind}} records AS
SELECT record_id,
       any_value(tenant) AS tenant,
       arg_max(business_key, attempt) AS business_key,
       arg_max(outcome, attempt) AS final_state,
       arg_max(disposition, attempt) AS disposition,
       max(attempt) AS attempts,
       arg_max(job_key, attempt) AS last_job_key,
       sum(CAST(cost_usd AS DECIMAL(38, 18))) AS cost_usd
FROM outcomes
GROUP BY record_id;

CREATE OR REPLACE {{.Kind}} manifests AS
SELECT * FROM read_parquet({{.Manifests}}, union_by_name = true);

CREATE OR REPLACE {{.Kind}} shards AS
SELECT * FROM read_parquet({{.Shards}}, union_by_name = true);

CREATE OR REPLACE {{.Kind}} ledger AS
SELECT * FROM read_parquet({{.Ledger}}, union_by_name = true);
