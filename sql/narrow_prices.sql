-- Whether lines.sql can work out every line's cost of the job in
-- DECIMAL(18, 12) (model_prices' *_n columns, 64-bit integers) instead of
-- DECIMAL(38, 18) (128-bit, every product checked for overflow), and get the
-- same exact values. It can when every price of a priced line has at most 12
-- decimals (so its *_n column is the same value) and no line can cost
-- 10^6 USD, DECIMAL(18, 12)'s range. A line is priced only with each token
-- count between 0 and 10^9 (lines.sql's usage_ok) and its cached and cache
-- write tokens inside its input tokens, so it costs at most 10^9 × (the
-- dearest of its input-side prices + its output price); below 0.000999 USD a
-- token that is under 999,000 USD. DuckDB's arithmetic fails on an overflow
-- rather than wrap, so a bound missed here would stop a reconcile, never
-- misprice a line. Otherwise (a price with more decimals, a price above
-- about 999 USD per million tokens) lines.sql takes DECIMAL(38, 18).
SELECT coalesce(bool_and(
           input_n IS NOT DISTINCT FROM input_per_token
           AND cached_n IS NOT DISTINCT FROM cached_per_token
           AND cache_write_n IS NOT DISTINCT FROM cache_write_per_token
           AND cache_write_1h_n IS NOT DISTINCT FROM cache_write_1h_per_token
           AND output_n IS NOT DISTINCT FROM output_per_token
           AND coalesce(greatest(abs(input_per_token), abs(cached_per_token), abs(cache_write_per_token), abs(cache_write_1h_per_token)), 0)
               + coalesce(abs(output_per_token), 0) < 0.000999), true) AS narrow
FROM model_prices
WHERE model IS NOT NULL;
