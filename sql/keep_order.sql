-- The table reads that rely on a filtered scan keeping its source's order
-- (cost_scan.sql) run with insertion order preserved.
SET preserve_insertion_order = true;
