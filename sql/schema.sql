-- Success lines whose structured output failed --output-schema (empty without one).
CREATE OR REPLACE TEMP TABLE schema_failures (
    s_raw VARCHAR,
    s_channel VARCHAR,
    s_line BIGINT,
    s_error VARCHAR
);
