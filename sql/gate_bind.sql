-- Binds a checked quality-gate predicate against the result row without running it.
EXPLAIN SELECT count(*) FROM attempts_raw WHERE ({{.Gate}}
);
