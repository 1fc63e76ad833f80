-- What a catalog records about itself, for catalog --refresh: live or
-- snapshot, the lake it reads (live: its folder relative to the catalog's)
-- and the tenant it is limited to ('' for all).
CREATE OR REPLACE TABLE batchlake_catalog AS
SELECT {{.Kind}} AS kind, {{.Lake}} AS lake, {{.Tenant}} AS tenant, now() AS written_at;
