-- Cost attribution grouped by the chosen dimensions (validated against a fixed
-- list by the Go side); filters are bound parameters. With .Family the job
-- filter takes the job and its retry descendants (manifests whose
-- parent_job_key is the job, recursively: a fallback family too).
{{- if .Family}}
WITH RECURSIVE fam(job_key) AS (
    SELECT CAST(? AS VARCHAR)
    UNION
    SELECT m.job_key FROM manifests m JOIN fam f ON m.parent_job_key = f.job_key
)
{{- end}}
SELECT {{.Select}}
       count(*) AS lines,
       count(DISTINCT record_id) FILTER (WHERE record_id <> '') AS records,
       sum(cost_usd) AS cost_usd
FROM costs
WHERE (CAST(? AS VARCHAR) = '' OR job_key {{if .Family}}IN (SELECT job_key FROM fam){{else}}= ?{{end}})
  AND (CAST(? AS VARCHAR) = '' OR tenant = ?)
{{.GroupBy}}
ORDER BY {{.OrderBy}};
