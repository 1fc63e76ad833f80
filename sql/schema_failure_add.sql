-- One line that failed --output-schema (bound parameters).
INSERT INTO schema_failures VALUES (?, ?, ?, ?);
