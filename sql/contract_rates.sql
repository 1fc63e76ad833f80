-- The output contract's pass rate by provider and model version: of the
-- usable success lines (those --output-schema checks), how many satisfied
-- the JSON Schema (schema_failures holds the others).
SELECT a.provider, a.model_version,
       count(*) AS answers,
       count(*) FILTER (WHERE f.s_line IS NULL) AS passed
FROM attempts_raw a
LEFT JOIN schema_failures f
       ON f.s_raw = a.raw_sha256 AND f.s_channel = a.channel AND f.s_line = a.line_no
WHERE a.outcome = 'success' AND a.has_output
GROUP BY ALL
ORDER BY a.provider, a.model_version;
