-- A new memory limit for the session (.Limit, a quoted size such as
-- '131072KiB'). Below what DuckDB holds, it evicts and frees the rest; at any
-- size DuckDB's allocator then gives the kernel back the pages it kept freed
-- (releaseMemory).
SET memory_limit = {{.Limit}};
