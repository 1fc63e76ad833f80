-- The cost categories' names by number (cost_views.sql), for the Go side of
-- cost_scan.sql.
SELECT cat, category FROM cost_categories ORDER BY cat;
