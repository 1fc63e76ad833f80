-- Rows of a merge's costs table (a reconcile reads cost_scan.sql): one per
-- result line, in (raw_sha256, channel, line_no) order (out_no numbers the
-- files in that order over all the partitions' lines, so one query, sorted).
-- out_no is returned for the Go side to check the order of every row.
SELECT job_key, tenant, coalesce(record_id, '') AS record_id, custom_id, coalesce(attempt, 0) AS attempt,
       provider, model_version, category, raw_sha256, line_no, coalesce(price_model, '') AS price_model,
       CAST(cost_usd AS VARCHAR) AS cost_usd, out_no, CAST(coalesce(unpriced, false) AS INTEGER) AS unpriced
FROM line_costs
ORDER BY out_no, line_no;
