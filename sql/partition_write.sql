-- The partial results of reconcile --partition: the outcomes and line_costs
-- tables of reconcile.sql, whole (every column, exact decimals), for the
-- merge to combine. Sorted, so the same partition writes the same rows.
COPY (SELECT * FROM outcomes ORDER BY record_id)
TO {{.Outcomes}} (FORMAT parquet, COMPRESSION zstd);

COPY (SELECT * FROM line_costs ORDER BY raw_sha256, channel, line_no)
TO {{.Costs}} (FORMAT parquet, COMPRESSION zstd);
