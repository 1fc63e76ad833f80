-- Per-token prices (USD, batch multiplier applied: cached_batch_multiplier
-- to cached_per_token), loaded from the price table. cache_write_per_token
-- prices the 5-minute (default) cache writes, cache_write_1h_per_token the
-- one-hour ones.
CREATE OR REPLACE TEMP TABLE prices (
    provider VARCHAR,
    model VARCHAR,
    effective_from TIMESTAMP, -- NULL: since always
    input_per_token DECIMAL(38, 18),
    cached_per_token DECIMAL(38, 18),
    cache_write_per_token DECIMAL(38, 18),
    cache_write_1h_per_token DECIMAL(38, 18),
    output_per_token DECIMAL(38, 18),
    -- The same without the batch multiplier: the on-demand price of the
    -- real-time API, for lines of the sync tail (raw_times.mode = 'sync').
    od_input_per_token DECIMAL(38, 18),
    od_cached_per_token DECIMAL(38, 18),
    od_cache_write_per_token DECIMAL(38, 18),
    od_cache_write_1h_per_token DECIMAL(38, 18),
    od_output_per_token DECIMAL(38, 18)
);

-- The job's provider and model id (the plan's --model): a Bedrock line is
-- priced by it too, since Bedrock's Claude output names the model without
-- its Bedrock id and Converse output names none.
CREATE OR REPLACE TEMP TABLE job_model (
    provider VARCHAR,
    model VARCHAR
);

-- The time each raw file's lines are priced at: its ingest time; and how
-- they were sent: batch, or sync (the real-time API, at the on-demand price).
CREATE OR REPLACE TEMP TABLE raw_times (
    channel VARCHAR,
    raw_sha256 VARCHAR,
    priced_at TIMESTAMP,
    mode VARCHAR
);
