-- A live catalog's views name the lake by paths relative to the catalog's
-- folder; while catalog makes (and so binds) them, relative paths resolve
-- there, wherever batchlake runs.
SET file_search_path = {{.Dir}};
