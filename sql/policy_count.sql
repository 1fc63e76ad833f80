-- How many records a cap sent to the manual queue in this job.
SELECT count(*) FROM outcomes WHERE disposition = 'manual' AND reason IN ('token_cap', 'cost_cap') AND outcome <> 'failed_permanent';
