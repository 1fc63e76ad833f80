-- The provider, model version and price model of each mp_no (model_prices,
-- reconcile.sql), which the costs table's Go side names each line's by.
SELECT mp_no, provider, coalesce(model_version, '') AS model_version, coalesce(model, '') AS price_model
FROM model_prices
ORDER BY mp_no;
