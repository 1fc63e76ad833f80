-- The result files by out_no (the costs table's file order), for the Go side
-- to name each cost_scan.sql row's raw file.
SELECT out_no, raw_sha256 FROM files ORDER BY out_no;
