-- The price rows, one statement for them all; values are quoted literals
-- rendered by the Go side: the per-token prices with the batch multiplier,
-- then without it (on demand, the sync tail).
INSERT INTO prices VALUES
{{- range $i, $p := .Rows}}{{if $i}},{{end}}
    ({{$p.Provider}}, {{$p.Model}}, CAST({{$p.From}} AS TIMESTAMP), CAST({{$p.Input}} AS DECIMAL(38, 18)), CAST({{$p.Cached}} AS DECIMAL(38, 18)), CAST({{$p.CacheWrite}} AS DECIMAL(38, 18)), CAST({{$p.CacheWrite1h}} AS DECIMAL(38, 18)), CAST({{$p.Output}} AS DECIMAL(38, 18)),
     CAST({{$p.ODInput}} AS DECIMAL(38, 18)), CAST({{$p.ODCached}} AS DECIMAL(38, 18)), CAST({{$p.ODCacheWrite}} AS DECIMAL(38, 18)), CAST({{$p.ODCacheWrite1h}} AS DECIMAL(38, 18)), CAST({{$p.ODOutput}} AS DECIMAL(38, 18))){{end}};
