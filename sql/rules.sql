-- Retry rules: HTTP statuses and error codes that make a failure retryable,
-- and codes that make it permanent whatever the status.
CREATE OR REPLACE TEMP TABLE retry_status (status INTEGER);
CREATE OR REPLACE TEMP TABLE retry_codes (code VARCHAR);
CREATE OR REPLACE TEMP TABLE permanent_codes (code VARCHAR);
