-- The report's unpriced_models: each model whose lines had tokens but no
-- row of the price table (priced 0), and how many lines.
SELECT provider, coalesce(model_version, '') AS model, count(*) AS lines
FROM lines
WHERE unpriced
GROUP BY ALL
ORDER BY provider, model;
