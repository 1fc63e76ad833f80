-- Every line priced and in its cost category, run once the retry policy has
-- settled the outcomes' dispositions (outcomes.sql, then policy.sql).
--
-- A record's first success is its best line when that line succeeded; its
-- other successes are duplicate submissions. Every line of a record the retry
-- policy gave up on in this job (disposition manual, not failed_permanent:
-- past --max-attempts or a cap) is in the manual category; such a record has
-- no succeeded line, so only failure categories give way and the categories
-- still partition the lines.
--
-- The category is worked out here once, as a small number beside each line,
-- and lines is rebuilt with it: the costs table is read in several ranges
-- (cost_scan.sql) and the report reads the categories again, and each of
-- those reads would otherwise join every line to every outcome anew. Only
-- what is read from here on is kept (the policy has used the tokens).
--
-- Stored in the costs table's row order: the lines of expected records by
-- their record's place in the expected files (pos), a record's lines in (out_no,
-- line_no) order, then the lines of no record in (out_no, line_no) order. The
-- costs table is written from it a range of pos at a time, each line named by
-- its record read from the expected file itself (tables.go), so the records'
-- strings are never carried through the sort: only an unknown line keeps its
-- custom_id. Each range read touches only its own row groups (DuckDB keeps each
-- row group's min and max of every column). With .Sorted it is sorted here:
-- in one statement, or in a job classified a group of buckets at a time
-- (.Grouped) one statement per group (.Group; .Insert after the first, .Last
-- the last), each sorting only its group's lines in memory where one sort of
-- them all spilled. A group's records fill whole expected files (a file
-- holds one bucket), so each range of pos the costs table is read in lies in
-- one group, in order; the lines of no record are sorted again as they are
-- read (cost_scan.sql). If DuckDB runs out of memory in a sort, sort.go runs
-- this again without .Sorted, to store every line unsorted as costed_u, and
-- cost_sort.sql sorts it a range at a time.
SET preserve_insertion_order = false;
{{- if not .Insert}}

-- The two small sets of records the categories look up (below), once.
CREATE OR REPLACE TEMP TABLE given_up AS
SELECT pos FROM outcomes
WHERE disposition = 'manual' AND outcome <> 'failed_permanent';

CREATE OR REPLACE TEMP TABLE answered_sent AS
SELECT pos FROM outcomes
WHERE outcome IN ('succeeded', 'quality_failed')
  AND pos IN (SELECT pos FROM lines WHERE error_code = 'maybe_sent');
{{- end}}
{{- if .Sorted}}

SET preserve_insertion_order = true;

{{if .Insert}}INSERT INTO costed{{else}}CREATE OR REPLACE TEMP TABLE costed AS{{end}}
{{- else}}

CREATE OR REPLACE TEMP TABLE costed_u AS
{{- end}}
SELECT l.pos, f.out_no, l.line_no, l.custom_id, l.mp_no, l.unpriced, l.cost_usd,
    CAST(CASE
        WHEN l.pos IS NULL THEN 0
        WHEN l.rank = 1 AND nb.line_key IS NULL THEN 1
        WHEN l.rank = 1 THEN 2
        -- A real-time call that may have reached the provider without an
        -- answer, of a record answered by another call: a duplicate submission.
        WHEN l.error_code = 'maybe_sent' AND a.pos IS NOT NULL THEN 2
        WHEN g.pos IS NOT NULL THEN 3
        WHEN l.rank = 2 THEN 4
        WHEN l.rank = 3 THEN 5
        ELSE 6
    END AS UTINYINT) AS cat -- named in cost_views.sql (cost_categories)
FROM lines l
JOIN files f ON f.file_no = l.file_no
-- Three lookups of small sets, none of them a hash table of every record
-- (at 10M what does not fit in --memory-limit spills): the succeeded lines
-- that are not their record's best (not_best, lines.sql), the records given
-- up on, and the answered records of the lines that may have been sent.
LEFT JOIN not_best nb ON nb.line_key = l.line_key
LEFT JOIN given_up g ON g.pos = l.pos
LEFT JOIN answered_sent a ON a.pos = l.pos
{{- if .Grouped}}
WHERE l.grp = {{.Group}}
{{- end}}
{{- if .Sorted}}
ORDER BY l.pos NULLS LAST, f.out_no, l.line_no;
{{- else}};
{{- end}}

SET preserve_insertion_order = false;
{{- if .Last}}

DROP TABLE lines;

DROP TABLE not_best;

DROP TABLE given_up;

DROP TABLE answered_sent;
{{- end}}
