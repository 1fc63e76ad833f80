-- The syntax tree of one piece of user SQL, as JSON, from DuckDB's own parser:
-- nothing is bound or run. json_serialize_sql refuses every statement that is
-- not a query, and lists each statement of a multi-statement string.
SELECT CAST(json_serialize_sql({{.Query}}) AS VARCHAR);
