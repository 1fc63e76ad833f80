-- The pricing time and mode of each raw file, one statement for them all;
-- values are quoted literals rendered by the Go side.
INSERT INTO raw_times VALUES
{{- range $i, $r := .Rows}}{{if $i}},{{end}}
    ({{$r.Channel}}, {{$r.Raw}}, CAST({{$r.At}} AS TIMESTAMP), {{$r.Mode}}){{end}};
