-- The syntax tree of a candidate quality-gate query, as JSON.
SELECT json_serialize_sql({{.Query}});
