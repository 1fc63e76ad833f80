-- BATCHLAKE_SQL_PROFILE, before a session is locked (lockdown.sql): profiling
-- off, so that DuckDB writes no profile of the read-only session's statements
-- into a folder the lockdown no longer lets it reach.
PRAGMA disable_profiling;
