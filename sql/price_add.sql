-- One price row; values are quoted literals rendered by the Go side: the
-- per-token prices with the batch multiplier, then without it (on demand).
INSERT INTO prices VALUES ({{.Provider}}, {{.Model}}, CAST({{.From}} AS TIMESTAMP), CAST({{.Input}} AS DECIMAL(38, 18)), CAST({{.Cached}} AS DECIMAL(38, 18)), CAST({{.CacheWrite}} AS DECIMAL(38, 18)), CAST({{.CacheWrite1h}} AS DECIMAL(38, 18)), CAST({{.Output}} AS DECIMAL(38, 18)),
    CAST({{.ODInput}} AS DECIMAL(38, 18)), CAST({{.ODCached}} AS DECIMAL(38, 18)), CAST({{.ODCacheWrite}} AS DECIMAL(38, 18)), CAST({{.ODCacheWrite1h}} AS DECIMAL(38, 18)), CAST({{.ODOutput}} AS DECIMAL(38, 18)));
