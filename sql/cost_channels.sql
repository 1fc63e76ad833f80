-- The result files' channels by out_no, for a partition's costs file
-- (partialCost), which keeps each line's channel for the merge.
SELECT out_no, channel FROM files ORDER BY out_no;
