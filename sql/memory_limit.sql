-- A new memory limit for the session (.Limit, a quoted size such as
-- '131072KiB'). Below what DuckDB holds, it evicts and frees the rest.
SET memory_limit = {{.Limit}};
