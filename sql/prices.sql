-- Per-token prices (USD, batch multiplier applied), loaded from the price table.
CREATE OR REPLACE TEMP TABLE prices (
    provider VARCHAR,
    model VARCHAR,
    effective_from TIMESTAMP, -- NULL: since always
    input_per_token DECIMAL(38, 18),
    cached_per_token DECIMAL(38, 18),
    cache_write_per_token DECIMAL(38, 18),
    output_per_token DECIMAL(38, 18)
);

-- The time each raw file's lines are priced at: its ingest time.
CREATE OR REPLACE TEMP TABLE raw_times (
    channel VARCHAR,
    raw_sha256 VARCHAR,
    priced_at TIMESTAMP
);
