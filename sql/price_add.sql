-- The price rows, one statement for them all; values are quoted literals
-- rendered by the Go side: the per-token prices with the batch multiplier,
-- then without it (on demand, the sync tail). The literals arrive as text and
-- are cast once per column, not once per value: binding a thousand casts
-- cost more than the rest of a small job's reconcile.
INSERT INTO prices
SELECT provider, model, CAST(effective_from AS TIMESTAMP),
       CAST(i AS DECIMAL(38, 18)), CAST(c AS DECIMAL(38, 18)), CAST(cw AS DECIMAL(38, 18)), CAST(cw1h AS DECIMAL(38, 18)), CAST(o AS DECIMAL(38, 18)),
       CAST(odi AS DECIMAL(38, 18)), CAST(odc AS DECIMAL(38, 18)), CAST(odcw AS DECIMAL(38, 18)), CAST(odcw1h AS DECIMAL(38, 18)), CAST(odo AS DECIMAL(38, 18))
FROM (VALUES
{{- range $i, $p := .Rows}}{{if $i}},{{end}}
    ({{$p.Provider}}, {{$p.Model}}, {{$p.From}}, {{$p.Input}}, {{$p.Cached}}, {{$p.CacheWrite}}, {{$p.CacheWrite1h}}, {{$p.Output}},
     {{$p.ODInput}}, {{$p.ODCached}}, {{$p.ODCacheWrite}}, {{$p.ODCacheWrite1h}}, {{$p.ODOutput}}){{end}}
) AS v(provider, model, effective_from, i, c, cw, cw1h, o, odi, odc, odcw, odcw1h, odo);
