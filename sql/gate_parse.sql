-- The syntax tree of a candidate quality-gate query, as JSON.
SELECT CAST(json_serialize_sql({{.Query}}) AS VARCHAR);
