-- The pricing time and mode of one raw file; values are quoted literals rendered by the Go side.
INSERT INTO raw_times VALUES ({{.Channel}}, {{.Raw}}, CAST({{.At}} AS TIMESTAMP), {{.Mode}});
