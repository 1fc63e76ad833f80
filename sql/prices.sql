-- Per-token prices (USD, batch multiplier applied), loaded from the price table.
CREATE OR REPLACE TEMP TABLE prices (
    provider VARCHAR,
    model VARCHAR,
    input_per_token DECIMAL(38, 18),
    cached_per_token DECIMAL(38, 18),
    output_per_token DECIMAL(38, 18)
);
