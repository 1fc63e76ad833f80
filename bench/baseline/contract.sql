-- The contract floor (blbaseline -contract): after the plain baseline's loads
-- of the output and error lines into Parquet (the attempts), the least that
-- DuckDB itself must do to turn the same files into the lake tables
-- (docs/contract.md) asks of plan, ingest and reconcile: a record id and request digest per
-- record, the expected table, the request lines again as a shard, each
-- record's outcome and each result line's cost, as zstd Parquet. It is still
-- a floor, not an equivalent: one shard file (shard ids by hash, no line
-- numbers), a model-config hash over the model and endpoint only (not the
-- canonical body), the shard and tables in no particular order (batchlake
-- keeps the input's order and sorts its tables), no quality gate, retry
-- shards, ledger, manifest or content-addressed names.
--
-- Each step begins at a line "-- step:" followed by its name; {{name}} is a
-- quoted path ({{input}} the input JSONL).

-- step: expected
-- Row order is not kept (the floor needs none): keeping it makes DuckDB
-- hold rows back, and an earlier form of this step, which read the bodies
-- back from a Parquet copy of the input, ran out of 512MB with it.
SET preserve_insertion_order = false;
COPY (
    WITH h AS (
        SELECT custom_id,
               sha256(body::VARCHAR) AS request_sha256,
               sha256(url || (body->>'$.model')) AS model_config_hash
        FROM read_ndjson({{input}}, columns = {custom_id: 'VARCHAR', method: 'VARCHAR', url: 'VARCHAR', body: 'JSON'},
                         ignore_errors = true)
        WHERE custom_id IS NOT NULL
    )
    SELECT 'bench' AS tenant,
           -- a shard by hash: an input row number (row_number() OVER ()) would
           -- hold every body in one window and spill
           'part-' || lpad(CAST(hash(custom_id) % 20 AS VARCHAR), 5, '0') AS shard_id,
           -- length-prefixed tenant, business key, source version, prompt
           -- version and model-config hash (docs/contract.md)
           sha256('5:bench' || CAST(length(custom_id) AS VARCHAR) || ':' || custom_id
                  || '0:' || '2:v1' || '64:' || model_config_hash) AS record_id,
           custom_id AS business_key, custom_id, CAST(1 AS INTEGER) AS attempt,
           request_sha256, model_config_hash
    FROM h
) TO {{expected}} (FORMAT parquet, COMPRESSION zstd);

-- step: shard
-- The request lines as they are (read as one text column; chr(1) cannot
-- occur unescaped in JSON), in no particular order: keeping the input's
-- order made DuckDB spill and took twice as long.
COPY (SELECT line FROM read_csv({{input}}, columns = {'line': 'VARCHAR'}, header = false, auto_detect = false,
                                delim = chr(1), quote = '', escape = ''))
TO {{shard}} (FORMAT csv, HEADER false, DELIMITER chr(1), QUOTE '', ESCAPE '');

-- step: lines
-- Every result line joined to its record by custom_id, classified (1
-- succeeded, 3 retryable, 4 permanent) and priced (gpt-4o-mini, batch).
CREATE TEMP TABLE lines AS
SELECT r.custom_id, r.channel, r.line_id, r.model_version, e.record_id,
       CAST(CASE
           WHEN r.status_code BETWEEN 200 AND 299 AND r.error_code IS NULL THEN 1
           WHEN r.status_code IN (408, 429) OR r.status_code >= 500
                OR r.error_code IN ('batch_expired', 'rate_limit_exceeded', 'server_error') THEN 3
           ELSE 4 END AS UTINYINT) AS rank,
       CAST(coalesce(r.input_tokens, 0) - coalesce(r.cached_input_tokens, 0) AS DECIMAL(18, 0)) * 0.000000075
         + CAST(coalesce(r.cached_input_tokens, 0) AS DECIMAL(18, 0)) * 0.0000000375
         + CAST(coalesce(r.output_tokens, 0) AS DECIMAL(18, 0)) * 0.0000003 AS cost_usd
FROM read_parquet([{{output}}, {{errors}}]) r
LEFT JOIN (SELECT custom_id, record_id FROM read_parquet({{expected}})) e ON e.custom_id = r.custom_id;

-- step: best
CREATE TEMP TABLE best AS
SELECT custom_id, count(*) AS lines, sum(cost_usd) AS cost_usd,
       min({'rank': rank, 'channel': channel, 'line_id': line_id}) AS b
FROM lines
WHERE record_id IS NOT NULL
GROUP BY custom_id;

-- step: outcomes
-- In no particular order: the contract asks for none (batchlake keeps record_id
-- order for reproducible files and range reads; a floor need not).
COPY (
    SELECT 'bench' AS tenant, e.record_id, e.business_key, e.shard_id, e.custom_id, e.attempt,
           CASE b.b.rank WHEN 1 THEN 'succeeded' WHEN 3 THEN 'failed_retryable'
                         WHEN 4 THEN 'failed_permanent' ELSE 'missing' END AS outcome,
           CASE WHEN b.b.rank = 1 THEN 'accepted' WHEN b.b.rank = 4 THEN 'manual' ELSE 'retry' END AS disposition,
           CAST(coalesce(b.lines, 0) AS INTEGER) AS lines,
           CAST(coalesce(b.cost_usd, 0) AS VARCHAR) AS cost_usd
    FROM read_parquet({{expected}}) e
    LEFT JOIN best b ON b.custom_id = e.custom_id
) TO {{outcomes}} (FORMAT parquet, COMPRESSION zstd);

-- step: costs
-- In no particular order either.
COPY (
    SELECT 'bench' AS tenant, coalesce(l.record_id, '') AS record_id, l.custom_id,
           l.model_version,
           CASE WHEN l.record_id IS NULL THEN 'unknown_id'
                WHEN l.rank = 1 AND b.b.channel = l.channel AND b.b.line_id = l.line_id THEN 'first_success'
                WHEN l.rank = 1 THEN 'duplicate_submission'
                ELSE 'failed' END AS category,
           l.channel, l.line_id, CAST(l.cost_usd AS VARCHAR) AS cost_usd
    FROM lines l
    LEFT JOIN best b ON b.custom_id = l.custom_id
) TO {{costs}} (FORMAT parquet, COMPRESSION zstd);

-- step: counts
-- The plain baseline's three counts, from what the floor wrote (its set
-- queries are not run): bench/run.sh and the test check them against the
-- generator's truth.
SELECT (SELECT count(*) FROM read_parquet({{expected}})),
       (SELECT count(*) FROM read_parquet({{outcomes}}) WHERE outcome = 'missing'),
       (SELECT count(DISTINCT custom_id) FROM lines WHERE record_id IS NULL),
       (SELECT count(*) FROM best WHERE lines > 1);
