-- SQL text printed back by DuckDB from a syntax tree (json_serialize_sql's form).
SELECT json_deserialize_sql(CAST({{.Tree}} AS JSON));
