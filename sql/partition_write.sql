-- The partial results of reconcile --partition: the outcomes table
-- (outcomes.sql) and the line_costs view (cost_views.sql), whole (every
-- column, exact decimals; job_key and tenant, which the outcomes table does
-- not keep, from the manifest: .JobKey and .Tenant; record_id, which it does
-- not keep either, from the expected files by pos), for the merge to
-- combine. Sorted, so the same partition writes the same rows, by integer
-- keys: the outcomes by their place in the expected files (pos), the order
-- the merge writes, and the costs in the costs table's order
-- (line_costs.sql), which the merge sorts again over every partition's.
COPY (SELECT {{.JobKey}} AS job_key, {{.Tenant}} AS tenant, e.record_id, o.*
      FROM outcomes o JOIN (SELECT pos, record_id FROM expected_at) e ON e.pos = o.pos
      ORDER BY o.pos)
TO {{.Outcomes}} (FORMAT parquet, COMPRESSION zstd);

COPY (SELECT * FROM line_costs ORDER BY pos NULLS LAST, out_no, line_no)
TO {{.Costs}} (FORMAT parquet, COMPRESSION zstd);
