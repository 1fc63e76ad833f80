-- Once the outcomes and costs tables are written, nothing reads the outcomes
-- and costed temp tables (a merge's are views over the partitions' files, and
-- it does not run this): dropping them frees their blocks, where lowering
-- DuckDB's limit for the retry's reads would evict them to --tmp-dir (0.05 s
-- of a 1M reconcile).
DROP TABLE costed;
DROP TABLE outcomes;
