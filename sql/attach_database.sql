-- A catalog's database file, made the session's default database so that its
-- views are created in it (the path is a quoted literal: any byte is fine).
ATTACH {{.Path}} AS catalog_db;
USE catalog_db;
