-- The partial results of reconcile --partition: the outcomes table
-- (outcomes.sql) and the line_costs view (cost_views.sql), whole (every
-- column, exact decimals; job_key and tenant, which the outcomes table does
-- not keep, from the expected rows), for the merge to combine. Sorted, so
-- the same partition writes the same rows.
COPY (SELECT j.job_key, j.tenant, o.*
      FROM outcomes o
      CROSS JOIN (SELECT any_value(job_key) AS job_key, any_value(tenant) AS tenant FROM expected) j
      ORDER BY o.record_id)
TO {{.Outcomes}} (FORMAT parquet, COMPRESSION zstd);

COPY (SELECT * FROM line_costs ORDER BY raw_sha256, channel, line_no)
TO {{.Costs}} (FORMAT parquet, COMPRESSION zstd);
