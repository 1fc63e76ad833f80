-- The counts of the reconcile report (docs/contract.md), one row.
SELECT
    (SELECT count(*) FROM expected) AS expected,
    count(*) FILTER (WHERE outcome = 'succeeded') AS succeeded,
    count(*) FILTER (WHERE outcome = 'failed_retryable') AS failed_retryable,
    count(*) FILTER (WHERE outcome = 'failed_permanent') AS failed_permanent,
    count(*) FILTER (WHERE outcome = 'quality_failed') AS quality_failed,
    count(*) FILTER (WHERE outcome = 'missing') AS missing,
    (SELECT count(DISTINCT custom_id) FROM lines WHERE pos IS NULL) AS unknown,
    count(*) FILTER (WHERE lines > 1) AS duplicate,
    (SELECT count(*) FROM quarantine) AS quarantined,
    count(*) FILTER (WHERE disposition = 'retry') AS retry_records,
    count(*) FILTER (WHERE disposition = 'manual') AS manual_records,
    (SELECT count(*) FROM lines WHERE unpriced) AS unpriced_lines,
    count(*) FILTER (WHERE truncated) AS truncated
FROM outcomes;
