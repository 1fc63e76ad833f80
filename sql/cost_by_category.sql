-- Cost per category for the report; exact decimals rendered as text.
SELECT category, CAST(sum(cost_usd) AS VARCHAR) AS cost_usd
FROM line_costs_by
GROUP BY category
ORDER BY category;
