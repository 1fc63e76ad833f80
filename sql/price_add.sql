-- One price row; values are quoted literals rendered by the Go side.
INSERT INTO prices VALUES ({{.Provider}}, {{.Model}}, CAST({{.From}} AS TIMESTAMP), CAST({{.Input}} AS DECIMAL(38, 18)), CAST({{.Cached}} AS DECIMAL(38, 18)), CAST({{.CacheWrite}} AS DECIMAL(38, 18)), CAST({{.CacheWrite1h}} AS DECIMAL(38, 18)), CAST({{.Output}} AS DECIMAL(38, 18)));
