-- The retry rules of one table, one row per value; each value is a number or
-- an already-quoted string literal. One statement for them all: a statement
-- per row costs DuckDB a parse and a plan each.
INSERT INTO {{.Table}} VALUES
{{- range $i, $v := .Values}}{{if $i}},{{end}} ({{$v}}){{end}};
