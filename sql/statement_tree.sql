-- The syntax tree of one piece of user SQL, as JSON, from DuckDB's own parser:
-- nothing is bound or run. json_serialize_sql refuses every statement that is
-- not a query, and lists each statement of a multi-statement string. The
-- SQL is a bound parameter, not spliced into this file: a query whose lines
-- end in ';' would otherwise be cut into statements of this script.
SELECT CAST(json_serialize_sql(CAST(? AS VARCHAR)) AS VARCHAR);
