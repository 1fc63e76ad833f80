package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

// A reconcile past one machine: RunPartition reconciles the records of one
// partition (lake.Partition: by record_id) with their result lines and
// stores its partial tables and counts; Merge combines the n partitions of
// the same run into exactly the report, retry shards, lineage, outcomes and
// costs tables a single Run writes (byte for byte: the same keys), and
// finishes the ledger as Run does. Partitions touch no ledger: they may run
// anywhere, at once, again.

// PartitionVersion is the version of the partition result this code writes
// and reads: 4 splits by the hash of custom_id (lake.IDPartition) and both
// its outcomes and its costs file carry each record's place in the expected
// files (pos), the order of the merged outcomes and costs tables; 3 lacked
// the costs' pos, 2 the outcomes', and version 1 split by record_id, another
// split: their results do not merge with these.
const PartitionVersion = 4

// errOldPartition explains a stored partition result of another version.
func errOldPartition(key string, v int) error {
	return &errkind.UsageError{Msg: fmt.Sprintf("reconcile: partition result %s is of partition version %d, which this batchlake (version %d) cannot merge with new ones (they were split or written another way); run this reconcile with another number of partitions, or without --partition",
		key, v, PartitionVersion)}
}

// PartitionResult is the commit marker of one partition of a reconcile run
// (lake.PartitionKey), and what reconcile --partition prints: which
// partition it is, and its part of the run's report.
type PartitionResult struct {
	partitionID
	// Report holds the partition's counts and costs (they add up to the
	// merged report's), its outcomes and line_costs tables
	// (content-addressed Parquet objects, every column of lines.sql's and
	// outcomes.sql's tables), and the run's settings and files, to explain a refused merge.
	// Its Report is the key of the report the merge of this run writes: the
	// run's identity. Of the report's fields only partitionFields are stored.
	Report
}

// partitionID says which partition of which run a result is.
type partitionID struct {
	Version   int    `json:"partition_version"`
	Partition string `json:"partition"` // "k/n"
	K         int    `json:"k"`
	N         int    `json:"n"`
	Key       string `json:"key"` // its own key
}

// partitionFields are the fields of a partition result, its own and its
// report's, in the order it is written (docs/lake.md).
var partitionFields = []string{
	"partition_version", "job_key", "partition", "k", "n", "report", "key",
	"max_attempts", "retry_rules", "quality_gate", "accept_truncated", "prices_sha256", "output_schema_sha256", "files",
	"expected", "succeeded", "failed_retryable", "failed_permanent", "quality_failed", "missing", "unknown", "duplicate", "quarantined",
	"retry_records", "manual_records", "unpriced_lines", "truncated", "schema_failed_lines", "cost_usd",
	"outcomes_file", "costs_file", "reconciled_at", "unchanged",
}

// MarshalJSON writes partitionFields of r, in that order.
func (r PartitionResult) MarshalJSON() ([]byte, error) {
	fields := map[string]json.RawMessage{}
	for _, part := range []any{r.partitionID, r.Report} {
		b, err := json.Marshal(part)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &fields); err != nil {
			return nil, err
		}
	}
	var out bytes.Buffer
	out.WriteByte('{')
	for _, k := range partitionFields {
		v, ok := fields[k]
		if !ok {
			continue // omitted when empty
		}
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		name, _ := json.Marshal(k)
		out.Write(name)
		out.WriteByte(':')
		out.Write(v)
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

// settings renders what a run was made of, for comparison with a
// partition's.
func (r *Report) settings() map[string]string {
	return map[string]string{
		"max_attempts": fmt.Sprint(r.MaxAttempts), "retry_rules": r.RetryRules, "quality_gate": r.QualityGate,
		"accept_truncated": fmt.Sprint(r.AcceptTruncated),
		"prices_sha256":    r.Prices, "output_schema_sha256": r.OutputSchema,
		"input_shards": strings.Join(r.Files.InputShards, ","), "output files": strings.Join(r.Files.Output, ","),
		"error files": strings.Join(r.Files.Error, ","),
	}
}

// RunPartition reconciles partition p of a job: the records whose record_id
// falls in p and their result lines (unknown ids by the hash of their
// custom_id). Running it again returns the stored result with Unchanged set.
func RunPartition(ctx context.Context, l *lake.Lake, o Options, p lake.Partition) (*PartitionResult, error) {
	if err := p.Valid(); err != nil {
		return nil, &errkind.UsageError{Msg: "reconcile --partition: " + err.Error()}
	}
	if o.AllowRunning {
		return nil, errAllowRunningPartition
	}
	limitGoHeap(o)
	in, err := prepare(ctx, l, &o)
	if err != nil {
		return nil, err
	}
	key := lake.PartitionKey(in.job, in.run, p)
	var stored PartitionResult
	if err := l.GetJSON(ctx, key, lake.FormatPartition, &stored); err == nil {
		if stored.Version != PartitionVersion {
			return nil, errOldPartition(key, stored.Version)
		}
		stored.Unchanged = true
		return &stored, writePartitionOut(o.OutDir, &stored)
	} else if !errors.Is(err, lake.ErrNotFound) {
		return nil, err
	}
	// Refuse a job a single reconcile would refuse (shards not yet
	// submitted), so a fan-out fails early rather than at the merge.
	g := lake.NewLedger(l, o.Actor)
	err = lake.EachOf(ctx, len(in.m.Shards), lake.LedgerFanout, func(ctx context.Context, i int) error {
		s := in.m.Shards[i]
		last, err := g.Last(ctx, in.job, s.ShardID)
		if err != nil {
			return err
		}
		if !lake.CanTransition(last.State, lake.Reconciling) {
			return fmt.Errorf("reconcile %s: shard is %s, not ready to reconcile: %w", s.ShardID, last.State, lake.ErrIllegalTransition)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	// A partition holds about 1/n of the job's records (p is valid: n >= 1).
	e, err := OpenEngine(l, o.Engine.forRecords(in.m.ExpectedRecords/int64(p.N)))
	if err != nil {
		return nil, err
	}
	defer e.Close()
	rep := in.newReport(o)
	if err := in.stage(ctx, e, o, rep, &p); err != nil {
		return nil, err
	}
	if err := classify(ctx, e, in.gateSQL, o.AcceptTruncated, o.MaxAttempts, nil); err != nil {
		return nil, err
	}
	// The retry policy acts per record, so each partition applies it to its
	// own records (the ancestors' lines of every record are in the session).
	if err := settle(ctx, e, o.Caps); err != nil {
		return nil, err
	}
	if err := counts(ctx, e, rep); err != nil {
		return nil, err
	}
	if sum := rep.Succeeded + rep.QualityFailed + rep.FailedRetryable + rep.FailedPermanent + rep.Missing; sum != rep.Expected {
		return nil, fmt.Errorf("%w: partition %s: expected %d != succeeded %d + quality_failed %d + failed_retryable %d + failed_permanent %d + missing %d",
			ErrIdentity, p, rep.Expected, rep.Succeeded, rep.QualityFailed, rep.FailedRetryable, rep.FailedPermanent, rep.Missing)
	}
	if rep.CostUSD, err = costs(ctx, e); err != nil {
		return nil, err
	}
	res := &PartitionResult{partitionID: partitionID{Version: PartitionVersion, Partition: p.String(), K: p.K, N: p.N, Key: key}, Report: *rep}
	// As in a whole job's reconcile, the Go side writes the tables in the
	// memory DuckDB's statements freed.
	if err := e.releaseMemory(ctx); err != nil {
		return nil, err
	}
	if o.tablesStart != nil {
		o.tablesStart()
	}
	if res.OutcomesFile, res.CostsFile, err = writePartials(ctx, e, l, in.m, in.job, p, rep.Expected); err != nil {
		return nil, err
	}
	res.ReconciledAt = now(o.Now)
	// The marker commits the partition: written after the files it names.
	if _, err := l.PutJSON(ctx, key, lake.FormatPartition, res); err != nil {
		if !errors.Is(err, lake.ErrCorrupt) {
			return nil, err
		}
		// The same partition, run concurrently, committed first: use its result.
		if err := l.GetJSON(ctx, key, lake.FormatPartition, res); err != nil {
			return nil, err
		}
	}
	return res, writePartitionOut(o.OutDir, res)
}

// partialOutcome is a row of a partition's outcomes file: the outcomes
// temp table's row (outcomes.sql) with its record_id, job_key and tenant.
// The merge reads these files as its outcomes (merge_sources.sql).
type partialOutcome struct {
	JobKey      string     `parquet:"job_key,dict"`
	Tenant      string     `parquet:"tenant,dict"`
	RecordID    string     `parquet:"record_id"`
	CustomID    string     `parquet:"custom_id"`
	Attempt     int32      `parquet:"attempt"`
	Outcome     string     `parquet:"outcome,dict"`
	Reason      string     `parquet:"reason,dict"`
	Lines       int64      `parquet:"lines"`
	Disposition string     `parquet:"disposition,dict"`
	CostUSD     lake.Money `parquet:"cost_usd,decimal(18:38)"`
	Truncated   bool       `parquet:"truncated"`
	Pos         int64      `parquet:"pos"`
}

// partialCost is a row of a partition's costs file: a line's costs row
// (lake.CostRow, but the mode, which the merge finds again from the
// ingests) with its pos, its channel and its file's number in the partition
// (out_no), which the merge numbers again over all of them
// (merge_sources.sql). A line of no record has pos null, record_id "" and
// attempt 0.
type partialCost struct {
	JobKey       string     `parquet:"job_key,dict"`
	Tenant       string     `parquet:"tenant,dict"`
	CustomID     string     `parquet:"custom_id"`
	Provider     string     `parquet:"provider,dict"`
	ModelVersion string     `parquet:"model_version,dict"`
	RawSHA256    string     `parquet:"raw_sha256,dict"`
	LineNo       int64      `parquet:"line_no"`
	Channel      string     `parquet:"channel,dict"`
	OutNo        int32      `parquet:"out_no"`
	Category     string     `parquet:"category,dict"`
	PriceModel   string     `parquet:"price_model,dict"`
	Unpriced     bool       `parquet:"unpriced"`
	CostUSD      lake.Money `parquet:"cost_usd,decimal(18:38)"`
	Pos          int64      `parquet:"pos,optional"` // 0 (null): no expected row
	RecordID     string     `parquet:"record_id"`
	Attempt      int32      `parquet:"attempt"`
}

// writePartials stores the partition's outcomes and costs as
// content-addressed Parquet files (partialOutcome, partialCost) for the
// merge, both in the order the job's own tables keep (so the same partition
// writes the same bytes): the outcomes by pos, the costs by pos, out_no and
// line_no, the lines of no record last. They are written as a reconcile
// writes its tables (outcomePass), without a sort: each record's columns
// read from its expected file, its cost lines after it, from costed in the
// order it is stored.
func writePartials(ctx context.Context, e *Engine, l *lake.Lake, m *lake.Manifest, job lake.Digest, p lake.Partition, records int64) (outcomes, costs string, err error) {
	if err := e.ExecFile(ctx, "keep_order.sql", nil); err != nil {
		return "", "", err
	}
	ow, err := lake.NewTableWriter[partialOutcome](l, e.tmp, "partial-outcomes", m.Tenant, job)
	if err != nil {
		return "", "", err
	}
	defer ow.Abort()
	ctw, err := lake.NewTableWriter[partialCost](l, e.tmp, "partial-costs", m.Tenant, job)
	if err != nil {
		return "", "", err
	}
	defer ctw.Abort()
	opipe := lake.NewTablePipe(ctx, ow, pipeDepth)
	cpipe := lake.NewTablePipe(ctx, ctw, pipeDepth)
	cw, err := newCostWriter(ctx, e, m, nil, nil)
	if err == nil {
		cw.partial = cpipe
		cw.channels, err = numberedNames(ctx, e, "cost_channels.sql", 1)
	}
	if err == nil && len(cw.channels) != len(cw.raws) {
		err = fmt.Errorf("reconcile: %d result files, %d channels", len(cw.raws), len(cw.channels))
	}
	if err == nil {
		w := outcomePass{m: m, partial: opipe, cw: cw, part: &p, records: records}
		err = w.run(ctx, e)
	}
	if oerr := opipe.Close(err); err == nil {
		err = oerr
	}
	if err == nil {
		outcomes, err = opipe.CommitObject()
	}
	if err == nil {
		err = cw.finish(ctx, e)
	}
	if cerr := cpipe.Close(err); err == nil {
		err = cerr
	}
	if err != nil {
		return "", "", err
	}
	costs, err = cpipe.CommitObject()
	return outcomes, costs, err
}

func writePartitionOut(dir string, r *PartitionResult) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, fmt.Sprintf("partition-%04d-of-%04d.json", r.K, r.N)), append(b, '\n'), 0o644)
}

// Merge combines the partition results of a run (the same job, files and
// settings as o) into the run's report, as Run would write it. n is the
// number of partitions; 0 finds it from the results stored for this run.
// A missing partition, or results made with other inputs or settings, is a
// usage error that names them.
func Merge(ctx context.Context, l *lake.Lake, o Options, n int) (*Report, error) {
	limitGoHeap(o)
	if n < 0 || n > lake.MaxPartitions {
		return nil, &errkind.UsageError{Msg: fmt.Sprintf("reconcile --merge: --partitions %d: want 1..%d (or 0 to find it)", n, lake.MaxPartitions)}
	}
	if o.AllowRunning {
		return nil, errAllowRunningPartition
	}
	in, err := prepare(ctx, l, &o)
	if err != nil {
		return nil, err
	}
	g := lake.NewLedger(l, o.Actor)
	if stored, err := storedReport(ctx, l, g, in.m, in.runKey, nil); stored != nil || err != nil {
		if err != nil {
			return nil, err
		}
		return stored, writeOut(ctx, l, o.OutDir, stored)
	}
	l.ProbeAhead(ctx) // as Run's
	rep := in.newReport(o)
	if rep.DuplicateBatches, err = duplicateBatches(ctx, g, in.job, in.m); err != nil {
		return nil, err
	}
	want := rep.settings()
	parts, err := findPartitions(ctx, l, in, n, want)
	if err != nil {
		return nil, err
	}
	var outcomes, costs []string
	for _, p := range parts {
		if have := p.settings(); !maps.Equal(have, want) {
			return nil, &errkind.UsageError{Msg: fmt.Sprintf("reconcile --merge: partition %s (%s) was run with other inputs or settings: %s", p.Partition, p.Key, diffSettings(have, want))}
		}
		if p.JobKey != in.m.JobKey || p.Report.Report != in.runKey || p.Version != PartitionVersion {
			return nil, fmt.Errorf("reconcile --merge: partition result %s is for job %s run %s (version %d): %w", p.Key, p.JobKey, p.Report.Report, p.Version, lake.ErrCorrupt)
		}
		outcomes = append(outcomes, p.OutcomesFile)
		costs = append(costs, p.CostsFile)
		rep.SchemaFailed += p.SchemaFailed
	}

	e, err := OpenEngine(l, o.Engine.forRecords(in.m.ExpectedRecords))
	if err != nil {
		return nil, err
	}
	defer e.Close()
	src := map[string]string{}
	for name, files := range map[string]func() ([]string, error){
		"Expected":   func() ([]string, error) { return LocalFiles[lake.ExpectedRow](ctx, e, in.m.ExpectedFiles) },
		"Quarantine": func() ([]string, error) { return LocalFiles[lake.QuarantineRow](ctx, e, in.quarantineKeys) },
		"Attempts":   func() ([]string, error) { return LocalFiles[lake.AttemptRow](ctx, e, tableKeys(in.attempts)) },
		"Outcomes":   func() ([]string, error) { return e.stageAll(ctx, outcomes) },
		"Costs":      func() ([]string, error) { return e.stageAll(ctx, costs) },
	} {
		paths, err := files()
		if err != nil {
			return nil, err
		}
		src[name] = sqlList(paths)
	}
	if err := e.ExecFile(ctx, "merge_sources.sql", src); err != nil {
		return nil, err
	}
	if err := checkCoverage(ctx, e, in, len(parts)); err != nil {
		return nil, err
	}
	o.merged = true
	return lockAndReconcile(ctx, e, l, g, in, o, rep)
}

// stageAll gives DuckDB local, verified paths for content-addressed objects.
func (e *Engine) stageAll(ctx context.Context, keys []string) ([]string, error) {
	return e.stage.localAll(ctx, keys)
}

// checkCoverage proves the partitions hold every expected record and every
// ingested line exactly once.
func checkCoverage(ctx context.Context, e *Engine, in *runInputs, n int) error {
	rows, err := e.QueryFile(ctx, "merge_check.sql", nil)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		return fmt.Errorf("sql merge_check.sql: no row")
	}
	var expected, outcomes, covered, lines, distinct int64
	if err := rows.Scan(&expected, &outcomes, &covered, &lines, &distinct); err != nil {
		return fmt.Errorf("sql merge_check.sql: %w", err)
	}
	var ingested int64
	for _, r := range in.recs {
		ingested += r.Rows
	}
	if expected != in.m.ExpectedRecords || outcomes != expected || covered != expected || lines != ingested || distinct != lines {
		return fmt.Errorf("%w: the %d partitions hold %d outcomes, of %d of the job's records, and %d cost lines (%d distinct); the job expects %d records and ingested %d lines",
			ErrIdentity, n, outcomes, covered, lines, distinct, in.m.ExpectedRecords, ingested)
	}
	return rows.Err()
}

// diffSettings says how a partition's settings differ from the merge's.
func diffSettings(have, want map[string]string) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if have[k] != want[k] {
			out = append(out, fmt.Sprintf("%s %q (this merge: %q)", k, short(have[k]), short(want[k])))
		}
	}
	if len(out) == 0 {
		return "same settings, other run"
	}
	return strings.Join(out, "; ")
}

func short(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// findPartitions reads the n partition results of the run (n 0: the one n
// all of its stored results agree on, or the smallest complete one).
func findPartitions(ctx context.Context, l *lake.Lake, in *runInputs, n int, want map[string]string) ([]*PartitionResult, error) {
	keys, err := l.List(ctx, lake.PartitionPrefix(in.job))
	if err != nil {
		return nil, err
	}
	mine := map[int]map[int]string{} // n -> k -> key, for this run
	others := map[string][]string{}  // run hex -> keys, for other runs
	for _, k := range keys {
		_, run, p, ok := lake.ParsePartitionKey(k)
		if !ok {
			continue
		}
		if run != in.run {
			others[run.Hex()] = append(others[run.Hex()], k)
			continue
		}
		if mine[p.N] == nil {
			mine[p.N] = map[int]string{}
		}
		mine[p.N][p.K] = k
	}
	if n == 0 {
		for _, cand := range slices.Sorted(maps.Keys(mine)) {
			if len(mine[cand]) == cand {
				n = cand
				break
			}
		}
		if n == 0 && len(mine) == 1 {
			for cand := range mine {
				n = cand
			}
		}
	}
	var missing []string
	for k := range n {
		if _, ok := mine[n][k]; !ok {
			missing = append(missing, lake.Partition{K: k, N: n}.String())
		}
	}
	if n == 0 || len(missing) > 0 {
		what := "no partition results"
		if n > 0 {
			what = "no result for partition " + strings.Join(missing, ", ")
		}
		msg := fmt.Sprintf("reconcile --merge: job %s: %s of this run (the job's current files and these settings; the merged report would be %s)",
			in.m.JobKey, what, in.runKey)
		if n > 0 {
			msg += fmt.Sprintf("; run `batchlake reconcile --job %s --partition K/%d` with the same flags for each", in.m.JobKey, n)
		}
		for _, cand := range slices.Sorted(maps.Keys(mine)) {
			if cand != n {
				msg += fmt.Sprintf("; this run has %d of %d results for --partitions %d", len(mine[cand]), cand, cand)
			}
		}
		msg += otherRuns(ctx, l, others, want)
		return nil, &errkind.UsageError{Msg: msg}
	}
	var out []*PartitionResult
	for k := range n {
		var r PartitionResult
		if err := l.GetJSON(ctx, mine[n][k], lake.FormatPartition, &r); err != nil {
			return nil, err
		}
		if r.Version < PartitionVersion {
			return nil, errOldPartition(mine[n][k], r.Version)
		}
		if r.Version != PartitionVersion {
			return nil, fmt.Errorf("lake read %s: partition version %d is not one this batchlake knows; upgrade batchlake", mine[n][k], r.Version)
		}
		out = append(out, &r)
	}
	return out, nil
}

// otherRuns explains partition results of the job made with other inputs or
// settings than the merge's (want).
func otherRuns(ctx context.Context, l *lake.Lake, others map[string][]string, want map[string]string) string {
	var parts []string
	for _, run := range slices.Sorted(maps.Keys(others)) {
		keys := others[run]
		var names []string
		for _, k := range keys {
			if _, _, p, ok := lake.ParsePartitionKey(k); ok {
				names = append(names, p.String())
			}
		}
		var r PartitionResult
		if err := l.GetJSON(ctx, keys[0], lake.FormatPartition, &r); err != nil {
			parts = append(parts, fmt.Sprintf("run %s has partitions %s (unreadable: %v)", run[:12], strings.Join(names, ", "), err))
			continue
		}
		parts = append(parts, fmt.Sprintf("run %s has partitions %s, made with other inputs or settings: %s", run[:12], strings.Join(names, ", "), diffSettings(r.settings(), want)))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}

// sources names the session's source files for sources.sql, or with p for
// partition_sources.sql: only the files p reads (lake.Partition.Reads), the
// ones whose rows are all p's apart from the ones to filter, and the
// quarantine files in partition 0 alone. Every list starts with an empty
// file of the table's schema.
func (in *runInputs) sources(ctx context.Context, e *Engine, p *lake.Partition) (string, map[string]any, error) {
	expected := in.m.ExpectedTables()
	lists := map[string][]lake.TableFile{"Expected": expected, "Attempts": in.attempts}
	quarantine := in.quarantineKeys
	sources := "sources.sql"
	src := map[string]any{}
	if p != nil {
		sources, src["K"], src["N"] = "partition_sources.sql", p.K, p.N
		for _, name := range []string{"Expected", "Attempts"} {
			var whole, part []lake.TableFile
			for _, f := range lists[name] {
				switch read, all := p.Reads(f); {
				case all:
					whole = append(whole, f)
				case read:
					part = append(part, f)
				}
			}
			lists[name], lists[name+"Part"] = whole, part
		}
		if p.K != 0 {
			quarantine = nil
		}
	}
	// Each expected file's number in the whole job's list (from 1), for
	// expected_at's pos; 0 for the empty file that heads each list.
	fileNo := make(map[string]int, len(expected))
	for i, f := range expected {
		fileNo[f.Key] = i + 1
	}
	// Every table's files checked (fetched) together: side by side, on all
	// cores, not a table at a time.
	var all []string
	for _, files := range lists {
		all = append(all, tableKeys(files)...)
	}
	if err := e.stage.checkAll(ctx, append(all, quarantine...)); err != nil {
		return "", nil, err
	}
	for name, files := range lists {
		keys := tableKeys(files)
		var paths []string
		var err error
		if strings.HasPrefix(name, "Expected") {
			paths, err = LocalFiles[lake.ExpectedRow](ctx, e, keys)
			nos := make([]int, 1, len(keys)+1) // the empty file's 0 first
			for _, k := range keys {
				nos = append(nos, fileNo[k])
			}
			src[name+"Nos"] = sqlInts(nos)
		} else {
			paths, err = LocalFiles[lake.AttemptRow](ctx, e, keys)
		}
		if err != nil {
			return "", nil, err
		}
		src[name] = sqlList(paths)
	}
	paths, err := LocalFiles[lake.QuarantineRow](ctx, e, quarantine)
	if err != nil {
		return "", nil, err
	}
	src["Quarantine"] = sqlList(paths)
	return sources, src, nil
}

// sourceSet is a sources.sql or partition_sources.sql file and its data.
type sourceSet struct {
	file   string
	params map[string]any
}

// sourceGroups returns, for a job split into buckets (lake.Manifest.ExpectedSplit)
// and larger than about two groups of records, the sources of each group of
// buckets, each group about records records or fewer, followed by the whole
// job's sources; nil for any other job, which classify takes whole. A group
// is a partition of the job (lake.Partition) whose bounds are its buckets'
// own, so it reads its files whole and no other. A job with an attempts file
// that some group would read only in part (one of any rows, as ingest writes
// for a small result file of a job of up to ingest.SizedSplitMaxRecords
// records, or one older batchlake wrote) is taken whole too: each group would
// read all of that file's rows and hash every custom_id to keep its own.
func (in *runInputs) sourceGroups(ctx context.Context, e *Engine, records int64) ([]sourceSet, error) {
	n := groupCount(in.m.ExpectedRecords, in.m.ExpectedSplit, records)
	if n <= 1 {
		return nil, nil
	}
	for _, f := range in.attempts {
		for k := range n {
			if read, whole := (lake.Partition{K: k, N: n}).Reads(f); read && !whole {
				return nil, nil
			}
		}
	}
	sets := make([]sourceSet, 0, n+1)
	for k := range n {
		file, params, err := in.sources(ctx, e, &lake.Partition{K: k, N: n})
		if err != nil {
			return nil, err
		}
		sets = append(sets, sourceSet{file, params})
	}
	file, params, err := in.sources(ctx, e, nil)
	if err != nil {
		return nil, err
	}
	return append(sets, sourceSet{file, params}), nil
}

// groupCount is how many groups of buckets a job of n records split into
// split buckets is classified in: the fewest that divide split evenly and
// hold about per records or fewer each, and 1 (the job whole) when one or
// two groups would do or the job is not split.
func groupCount(n int64, split int, per int64) int {
	if split <= 1 || per <= 0 || n <= 2*per {
		return 1
	}
	want := (n + per - 1) / per
	for g := 2; g < split; g++ {
		if split%g == 0 && int64(g) >= want {
			return g
		}
	}
	return split
}

func tableKeys(fs []lake.TableFile) []string {
	keys := make([]string, len(fs))
	for i, f := range fs {
		keys[i] = f.Key
	}
	return keys
}
