-- The structured output of every usable success line, to validate in Go.
SELECT raw_sha256, channel, line_no, output_text
FROM attempts_raw
WHERE outcome = 'success' AND has_output;
