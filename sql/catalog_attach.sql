-- An existing catalog, read only, to read its batchlake_catalog table.
ATTACH {{.Path}} AS catalog_db (READ_ONLY);
