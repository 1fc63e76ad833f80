package reconcile

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lake/failpoint"
)

// pipeDepth is how many batches of rows may wait for a table's Parquet
// writer. Rows come in bursts: a range query's rows (EngineOptions.ChunkRows, 16 batches)
// are converted, then DuckDB runs the next range; with two batches of slack
// the writer sat idle through every such wait. Sixteen keep it encoding
// through the wait, for at most 16 × 4096 rows held per table.
const pipeDepth = 16

// rawModes maps each raw file sent through the real-time API (the sync
// tail) to its mode; files of batches are absent.
func rawModes(recs []lake.IngestRecord) map[string]string {
	out := map[string]string{}
	for _, r := range recs {
		if r.Mode != "" {
			out[r.Raw.Hex()] = r.Mode
		}
	}
	return out
}

// modeOf is the costs table's mode of a raw file's lines.
func modeOf(modes map[string]string, raw string) string {
	if m := modes[raw]; m != "" {
		return m
	}
	return "batch"
}

// writeTables stores the job's outcomes and costs tables. Rows are scanned in
// column batches where the build allows (see eachRow) and handed to a writer
// goroutine (lake.TablePipe), so Parquet encoding (zstd) overlaps DuckDB's
// work instead of following it.
//
// Both tables are read in ranges (chunks.go): DuckDB materialises a query's
// whole result before the first row comes out, so one query over every row
// held them all in memory at once. A reconcile's costs of expected records
// are written in the same pass over the expected files as its outcomes, each
// line named by its record's row there (costWriter); a merge's costs carry
// their records and are read after the outcomes.
func writeTables(ctx context.Context, e *Engine, l *lake.Lake, m *lake.Manifest, job lake.Digest, tmp string, merged, copyCols bool, modes map[string]string) (outcomes, costs string, err error) {
	if err := e.ExecFile(ctx, "keep_order.sql", nil); err != nil {
		return "", "", err
	}
	ow, err := lake.NewTableWriter[lake.OutcomeRow](l, tmp, "outcomes", m.Tenant, job)
	if err != nil {
		return "", "", err
	}
	defer ow.Abort()
	ctw, err := lake.NewTableWriter[lake.CostRow](l, tmp, "costs", m.Tenant, job)
	if err != nil {
		return "", "", err
	}
	defer ctw.Abort()
	// The outcomes repeat the expected rows' ids and keys in the expected
	// files' order: their chunks are copied from those files rather than
	// encoded again, where the files allow (lake.TableWriter.CopyColumns).
	w := outcomePass{m: m, records: m.ExpectedRecords}
	if err := w.stageFiles(ctx, e); err != nil {
		return "", "", err
	}
	if copyCols {
		if w.copied, err = ow.CopyColumns(copiedOutcomeColumns, w.paths); err != nil {
			return "", "", err
		}
	}
	opipe := lake.NewTablePipe(ctx, ow, pipeDepth)
	cpipe := lake.NewTablePipe(ctx, ctw, pipeDepth)
	var cw *costWriter // a reconcile's, not a merge's
	if !merged {
		cw, err = newCostWriter(ctx, e, m, cpipe, modes)
	}
	if err == nil {
		w.table, w.cw = opipe, cw
		err = w.run(ctx, e)
	}
	if oerr := opipe.Close(err); err == nil {
		err = oerr
	}
	if err != nil {
		cpipe.Close(err)
		return "", "", err
	}
	// The outcomes file is stored before the costs file (the failpoint order
	// crash tests rely on).
	start := time.Now()
	if outcomes, err = opipe.Commit(); err != nil {
		cpipe.Close(err)
		return "", "", err
	}
	logTiming("outcomes", "commit", start)
	failpoint.Hit(failpoint.ReconcileAfterOutcomes)

	if merged {
		var order costOrder
		err = mergeCosts(ctx, e, &order, cpipe, modes)
	} else {
		err = cw.finish(ctx, e)
	}
	if cerr := cpipe.Close(err); err == nil {
		err = cerr
	}
	if err != nil {
		return "", "", err
	}
	costs, err = cpipe.Commit()
	return outcomes, costs, err
}

// mergeCosts reads a merge's costs table: the partitions' lines, renumbered
// (line_costs, merge_sources.sql), sorted one range at a time
// (cost_rows.sql), so that no single sort holds every line of the job.
func mergeCosts(ctx context.Context, e *Engine, order *costOrder, cpipe *lake.TablePipe[lake.CostRow], modes map[string]string) error {
	ranges, _, err := costRanges(ctx, e, "line_costs", e.chunkRows)
	if err != nil {
		return err
	}
	for _, r := range ranges {
		// job_key tenant record_id custom_id attempt provider model_version category raw_sha256 line_no price_model cost_usd out_no unpriced pos
		err = e.eachRow(ctx, "cost_rows.sql", r, "ssssnssssnsmnnn", func(x *scanRow) error {
			s, n := x.s, x.n
			if err := order.next(n[4], n[2], n[1]); err != nil {
				return err
			}
			return cpipe.Add(lake.CostRow{JobKey: s[0], Tenant: s[1], RecordID: s[2], CustomID: s[3], Attempt: int32(n[0]), Provider: s[4],
				ModelVersion: s[5], Category: s[6], RawSHA256: s[7], LineNo: n[1], PriceModel: s[8], CostUSD: x.m[0], Unpriced: n[3] != 0,
				Mode: modeOf(modes, s[7])})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// outcomePass writes the outcomes of a session's expected records in the
// expected files' order: the files in the manifest's order, each one's rows
// in turn. The outcomes temp table is not sorted (outcomes.sql); each range
// of positions reads its narrow columns (outcome_rows.sql) and the wide ones
// from the expected file itself, which holds them in that order
// (lake.ExpectedCursor, reading its pages without DuckDB), and every row is
// checked to pair the same position and custom_id on both sides.
//
// With cw, each range's cost lines of expected records are read too
// (cost_scan.sql) and written after their record's outcome, named by the
// same expected row.
type outcomePass struct {
	m *lake.Manifest
	// The rows go to the job's outcomes table (table) or to a partition's
	// partial file (partial).
	table   *lake.TablePipe[lake.OutcomeRow]
	partial *lake.TablePipe[partialOutcome]
	cw      *costWriter
	// part, for a partition: its files' rows of other partitions have no
	// outcome, and are skipped.
	part *lake.Partition
	// records is how many outcomes the pass must write.
	records int64
	// files are the expected files with outcomes, in order, and paths their
	// local copies (stageFiles).
	files []fileRows
	paths []string
	// copied: the outcomes table takes the columns copiedOutcomeColumns
	// from the expected files, so its rows leave them empty.
	copied bool
}

// copiedOutcomeColumns are the outcomes table's columns that repeat the
// expected table's, row for row.
var copiedOutcomeColumns = []string{"record_id", "business_key", "shard_id", "custom_id", "attempt", "parent_job_key"}

// stageFiles lists the expected files with outcomes and stages them (hashed,
// or fetched from a remote lake): a partition stages only its share.
func (w *outcomePass) stageFiles(ctx context.Context, e *Engine) error {
	keys := tableKeys(w.m.ExpectedTables())
	files, err := outcomeFiles(ctx, e, int64(len(keys)), w.part != nil)
	if err != nil {
		return err
	}
	w.files, w.paths = files, make([]string, len(files))
	for i, f := range files {
		if w.paths[i], err = e.stage.local(ctx, keys[f.file-1]); err != nil {
			return err
		}
	}
	return nil
}

func (w *outcomePass) run(ctx context.Context, e *Engine) error {
	if w.files == nil {
		if err := w.stageFiles(ctx, e); err != nil {
			return err
		}
	}
	var (
		nar   outcomeCols
		cols  lake.ExpectedCols
		total int64
	)
	for i, f := range w.files {
		if err := w.file(ctx, e, &nar, &cols, w.paths[i], f); err != nil {
			return err
		}
		total += f.n
	}
	if total != w.records {
		return fmt.Errorf("reconcile: %d outcome rows written, %d records expected", total, w.records)
	}
	return nil
}

// file writes the outcomes (and with cw their costs) of one expected file's
// rows with outcomes, f.n of them, in the file's order.
func (w *outcomePass) file(ctx context.Context, e *Engine, nar *outcomeCols, cols *lake.ExpectedCols, path string, f fileRows) error {
	cur, err := lake.OpenExpectedCursor(path)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	defer cur.Close()
	if w.copied || w.partial != nil {
		// The record's other columns come with the copied chunks, or are
		// not in a partition's partial outcomes.
		cur.IDsOnly()
	}
	// A partition reads every row of the file, and has outcomes of its own.
	rows := cur.Rows()
	if w.part == nil && rows != f.n {
		return fmt.Errorf("reconcile: expected file %d has %d rows, its outcomes %d", f.file, rows, f.n)
	}
	var written int64
	for lo := int64(0); lo < rows; lo += outcomeRangeRows * e.chunkRows {
		hi := min(lo+outcomeRangeRows*e.chunkRows, rows)
		if err := nar.read(ctx, e, f.file<<40|lo, f.file<<40|hi, w.part != nil); err != nil {
			return err
		}
		for wlo := lo; wlo < hi; wlo += e.chunkRows {
			whi := min(wlo+e.chunkRows, hi)
			if w.cw != nil {
				if err := w.cw.read(ctx, e, f.file<<40|wlo, f.file<<40|whi); err != nil {
					return err
				}
			}
			for slo := wlo; slo < whi; slo += expectedReadRows {
				if err := cur.Next(int(min(slo+expectedReadRows, whi)-slo), cols); err != nil {
					return fmt.Errorf("reconcile: %w", err)
				}
				for j := range cols.Len() {
					at := slo + int64(j)
					i := at - lo
					if !nar.seen[i] {
						// Only a partition's reads leave rows unseen (sparse):
						// those of the other partitions.
						if w.part != nil && lake.IDPartition(cols.CustomID[j], w.part.N) != w.part.K {
							continue
						}
						return fmt.Errorf("reconcile: expected file %d row %d (record %s, custom_id %q) has no outcome",
							f.file, at, cols.RecordID[j], cols.CustomID[j])
					}
					if nar.pos[i] != f.file<<40|at || nar.idHash[i] != textHash(cols.CustomID[j]) {
						return fmt.Errorf("reconcile: expected file %d row %d (record %s, custom_id %q) does not pair with its outcome (%s)",
							f.file, at, cols.RecordID[j], cols.CustomID[j], nar.at(i))
					}
					if err := w.add(cols, j, nar, i); err != nil {
						return err
					}
					if w.cw != nil {
						if err := w.cw.record(f.file<<40|at, cols.RecordID[j], cols.CustomID[j], cols.Attempt[j], nar.lines[i], nar.cost[i]); err != nil {
							return err
						}
					}
					written++
				}
			}
			if w.cw != nil {
				if err := w.cw.rangeDone(); err != nil {
					return err
				}
			}
		}
	}
	if written != f.n {
		return fmt.Errorf("reconcile: %d outcomes of expected file %d written, it has %d", written, f.file, f.n)
	}
	return nil
}

// add writes the outcome of expected row j of cols, whose own columns are
// row i of nar.
func (w *outcomePass) add(cols *lake.ExpectedCols, j int, nar *outcomeCols, i int64) error {
	if w.partial != nil {
		return w.partial.Add(partialOutcome{JobKey: w.m.JobKey, Tenant: w.m.Tenant, RecordID: cols.RecordID[j], CustomID: cols.CustomID[j],
			Attempt: cols.Attempt[j], Outcome: nar.outcome[i], Reason: nar.reason[i], Lines: int64(nar.lines[i]),
			Disposition: nar.disposition[i], CostUSD: nar.cost[i], Truncated: nar.truncated[i], Pos: nar.pos[i]})
	}
	row := lake.OutcomeRow{JobKey: w.m.JobKey, Tenant: w.m.Tenant,
		Outcome: nar.outcome[i], Disposition: nar.disposition[i], Reason: nar.reason[i],
		Lines: nar.lines[i], CostUSD: nar.cost[i], Truncated: nar.truncated[i]}
	if !w.copied {
		row.RecordID, row.BusinessKey, row.ShardID, row.CustomID = cols.RecordID[j], cols.BusinessKey[j], cols.ShardID[j], cols.CustomID[j]
		row.Attempt, row.ParentJobKey = cols.Attempt[j], cols.ParentJobKey[j]
	}
	return w.table.Add(row)
}

// expectedReadRows is how many rows of an expected file are read at a time.
// The rows' strings keep their pages alive until the table writers have
// encoded them, so reading a range's rows at once held every page of it
// too: under the Go heap's soft limit (goHeapLimit, then 128 MiB) a 10M
// reconcile took 51 s instead of 41.
const expectedReadRows = 4096

// outcomeRangeRows is how many wide reads (of the expected file and the
// costs, EngineOptions.ChunkRows rows) one narrow read (outcome_rows.sql) serves.
// A narrow read decompresses most of the unsorted outcomes table when a
// large job's rows are spread over it (at 10M the join that builds it
// spills), so fewer, larger ones cost less cpu, but hold more: at 10M, one
// per file (16 chunks) took about 7 of 14 cpu s off the narrow reads and
// raised reconcile's peak RSS from 768–770 MiB to 840–1 046 MiB, past the
// 1 GiB a task is given.
const outcomeRangeRows = 4

// outcomeCols holds a range of outcome_rows.sql, each row at its place.
type outcomeCols struct {
	pos, idHash                  []int64 // id_hash: custom_id's textHash
	outcome, disposition, reason []string
	lines                        []int32
	cost                         []lake.Money
	truncated                    []bool
	seen                         []bool
}

// read replaces c's rows by those at positions lo <= pos < hi, each at
// index pos - lo (seen), checking that each position comes once and, unless
// sparse (a partition's, which has only its own records' outcomes), that
// every position has its row.
func (c *outcomeCols) read(ctx context.Context, e *Engine, lo, hi int64, sparse bool) error {
	n := int(hi - lo)
	c.pos, c.idHash, c.lines, c.cost = resize(c.pos, n), resize(c.idHash, n), resize(c.lines, n), resize(c.cost, n)
	c.outcome, c.disposition, c.reason = resize(c.outcome, n), resize(c.disposition, n), resize(c.reason, n)
	c.truncated, c.seen = resize(c.truncated, n), resize(c.seen, n)
	clear(c.seen)
	got := 0
	// pos custom_id (its hash) outcome disposition reason lines cost_usd truncated
	err := e.eachRow(ctx, "outcome_rows.sql", map[string]any{"Lo": lo, "Hi": hi}, "nhsssnmn", func(x *scanRow) error {
		s, v := x.s, x.n
		i := v[0] - lo
		if i < 0 || i >= int64(n) || c.seen[i] {
			return fmt.Errorf("reconcile: two outcomes of expected file %d row %d", v[0]>>40, v[0]&(1<<40-1))
		}
		c.seen[i] = true
		got++
		c.pos[i], c.idHash[i] = v[0], v[1]
		c.outcome[i], c.disposition[i], c.reason[i] = s[0], s[1], s[2]
		c.lines[i], c.cost[i], c.truncated[i] = int32(v[2]), x.m[0], v[3] != 0
		return nil
	})
	if err != nil {
		return err
	}
	if got != n && !sparse {
		first := int64(slices.Index(c.seen, false))
		return fmt.Errorf("reconcile: expected file %d row %d has no outcome (%d of rows %d to %d have one)",
			lo>>40, (lo+first)&(1<<40-1), got, lo&(1<<40-1), (hi-1)&(1<<40-1))
	}
	return nil
}

// resize returns s with length n, reusing its array when it is large enough.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// at names row i's position and custom_id hash.
func (c *outcomeCols) at(i int64) string {
	if i < int64(len(c.pos)) {
		return fmt.Sprintf("of file %d row %d, custom_id hash %d", c.pos[i]>>40, c.pos[i]&(1<<40-1), c.idHash[i])
	}
	return "none"
}

// fileRows is how many outcomes an expected file (its number in the
// manifest's list, from 1) has.
type fileRows struct{ file, n int64 }

// outcomeFiles lists each expected file's outcomes (outcome_ranges.sql),
// checking that the file is one of the job's files (1..files) and, unless
// sparse (a partition's), that they number its rows from 0.
func outcomeFiles(ctx context.Context, e *Engine, files int64, sparse bool) ([]fileRows, error) {
	rows, err := e.QueryFile(ctx, "outcome_ranges.sql", nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []fileRows
	for rows.Next() {
		var f fileRows
		var first, last int64
		if err := rows.Scan(&f.file, &f.n, &first, &last); err != nil {
			return nil, fmt.Errorf("sql outcome_ranges.sql: %w", err)
		}
		if f.file < 1 || f.file > files {
			return nil, fmt.Errorf("reconcile: %d outcomes of expected file %d; the job has files 1 to %d", f.n, f.file, files)
		}
		if !sparse && (first != 0 || last != f.n-1) {
			return nil, fmt.Errorf("reconcile: expected file %d has %d outcomes for its rows %d to %d", f.file, f.n, first, last)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sql outcome_ranges.sql: %w", err)
	}
	return out, nil
}

// costWriter writes a reconcile's costs table from costed (line_costs.sql),
// whose rows are in the table's order: the lines of expected records a range
// of pos at a time, each named by the expected row its pos names as
// writeOutcomes reads it (so the records' strings are read once, for both
// tables), then the lines of no record (finish). Each row's raw file comes
// from its out_no, its provider and models from its mp_no.
type costWriter struct {
	m *lake.Manifest
	// The rows go to the job's costs table (pipe) or to a partition's
	// partial file (partial), which also keeps each line's channel.
	pipe      *lake.TablePipe[lake.CostRow]
	partial   *lake.TablePipe[partialCost]
	channels  []string // by out_no - 1, for partial
	raws      []string // by out_no - 1
	fileModes []string // by out_no - 1: one lookup per file, not per line
	models    map[int64]costModel
	cats      []string    // category names by number
	ranges    []costRange // of the lines of no record
	known     int64       // lines of expected records in costed
	written   int64       // of those, written
	order     costOrder

	lines []costLine // the lines of the range of pos read, in costed's order
	next  int        // the first not yet written
}

// costLine is a row of cost_scan.sql.
type costLine struct {
	pos, line, out, mp, cat int64
	customID                string
	cost                    lake.Money
	unpriced                bool
}

func newCostWriter(ctx context.Context, e *Engine, m *lake.Manifest, pipe *lake.TablePipe[lake.CostRow], modes map[string]string) (*costWriter, error) {
	raws, err := costFiles(ctx, e)
	if err != nil {
		return nil, err
	}
	models, err := costModels(ctx, e)
	if err != nil {
		return nil, err
	}
	ranges, known, err := costRanges(ctx, e, "costed", e.chunkRows)
	if err != nil {
		return nil, err
	}
	cats, err := costCategories(ctx, e)
	if err != nil {
		return nil, err
	}
	c := &costWriter{m: m, pipe: pipe, raws: raws, models: models, cats: cats, fileModes: make([]string, len(raws)), known: known}
	for i, raw := range raws {
		c.fileModes[i] = modeOf(modes, raw)
	}
	for _, r := range ranges {
		if r.Unknown {
			c.ranges = append(c.ranges, r)
		}
	}
	return c, nil
}

// read loads the lines of the expected records at positions lo <= pos < hi.
func (c *costWriter) read(ctx context.Context, e *Engine, lo, hi int64) error {
	c.lines, c.next = c.lines[:0], 0
	return c.scan(ctx, e, costRange{Known: true, PosLo: lo, PosHi: hi}, func(l costLine) error {
		if l.pos < lo || l.pos >= hi {
			return fmt.Errorf("reconcile: cost row of file %d line %d names expected file %d row %d, outside the range read", l.out, l.line, l.pos>>40, l.pos&posRows)
		}
		c.lines = append(c.lines, l)
		return nil
	})
}

// record writes the loaded lines of the record at pos, which its outcome
// says number lines and cost cost in all: the lines must add up to both, or
// they are not this record's.
func (c *costWriter) record(pos int64, recordID, customID string, attempt, lines int32, cost lake.Money) error {
	var n int32
	var sum lake.Money
	for ; c.next < len(c.lines) && c.lines[c.next].pos == pos; c.next++ {
		l := c.lines[c.next]
		if err := c.add(l, recordID, customID, attempt); err != nil {
			return err
		}
		var err error
		if sum, err = sum.Add(l.cost); err != nil {
			return fmt.Errorf("reconcile: record %s: %w", recordID, err)
		}
		n++
	}
	if n != lines || sum != cost {
		return fmt.Errorf("reconcile: record %s (expected file %d row %d) has %d cost rows of %s USD, its outcome %d lines of %s USD",
			recordID, pos>>40, pos&posRows, n, sum, lines, cost)
	}
	c.written += int64(n)
	return nil
}

// rangeDone checks that every loaded line was its record's.
func (c *costWriter) rangeDone() error {
	if c.next < len(c.lines) {
		l := c.lines[c.next]
		return fmt.Errorf("reconcile: cost row of file %d line %d names expected file %d row %d, which the range's rows did not pair with", l.out, l.line, l.pos>>40, l.pos&posRows)
	}
	return nil
}

// finish writes the lines of no record, after checking that every line of
// an expected record was written.
func (c *costWriter) finish(ctx context.Context, e *Engine) error {
	if c.written != c.known {
		return fmt.Errorf("reconcile: %d cost rows of expected records written, costed has %d", c.written, c.known)
	}
	for _, r := range c.ranges {
		err := c.scan(ctx, e, r, func(l costLine) error {
			if l.pos >= 0 {
				return fmt.Errorf("reconcile: cost row of file %d line %d names a record among the lines of none", l.out, l.line)
			}
			return c.add(l, "", l.customID, 0)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *costWriter) scan(ctx context.Context, e *Engine, r costRange, fn func(costLine) error) error {
	// pos cat line_no cost_usd out_no unpriced mp_no [custom_id]
	kinds := colKinds("nnnmnnn")
	if r.Unknown {
		kinds += "s"
	}
	return e.eachRow(ctx, "cost_scan.sql", r, kinds, func(x *scanRow) error {
		n := x.n
		l := costLine{pos: n[0], cat: n[1], line: n[2], cost: x.m[0], out: n[3], unpriced: n[4] != 0, mp: n[5]}
		if r.Unknown {
			l.customID = x.s[0]
		}
		return fn(l)
	})
}

func (c *costWriter) add(l costLine, recordID, customID string, attempt int32) error {
	if err := c.order.next(l.pos, l.out, l.line); err != nil {
		return err
	}
	if l.out < 1 || l.out > int64(len(c.raws)) {
		return fmt.Errorf("reconcile: cost row of file %d, not in the job's %d files", l.out, len(c.raws))
	}
	if l.cat < 0 || l.cat >= int64(len(c.cats)) {
		return fmt.Errorf("reconcile: cost row of file %d line %d has category %d, not one of the %d", l.out, l.line, l.cat, len(c.cats))
	}
	mp, ok := c.models[l.mp]
	if !ok {
		return fmt.Errorf("reconcile: cost row of file %d line %d has no provider and model (mp_no %d)", l.out, l.line, l.mp)
	}
	if c.partial != nil {
		var pos int64 // 0 is no expected row: the column's null
		if l.pos >= 0 {
			pos = l.pos
		}
		return c.partial.Add(partialCost{JobKey: c.m.JobKey, Tenant: c.m.Tenant, CustomID: customID, Provider: mp.provider,
			ModelVersion: mp.version, RawSHA256: c.raws[l.out-1], LineNo: l.line, Channel: c.channels[l.out-1], OutNo: int32(l.out),
			Category: c.cats[l.cat], PriceModel: mp.price, Unpriced: l.unpriced, CostUSD: l.cost, Pos: pos, RecordID: recordID, Attempt: attempt})
	}
	return c.pipe.Add(lake.CostRow{JobKey: c.m.JobKey, Tenant: c.m.Tenant, RecordID: recordID, CustomID: customID, Attempt: attempt,
		Provider: mp.provider, ModelVersion: mp.version, Category: c.cats[l.cat], RawSHA256: c.raws[l.out-1], LineNo: l.line,
		PriceModel: mp.price, CostUSD: l.cost, Unpriced: l.unpriced, Mode: c.fileModes[l.out-1]})
}

// costModel is a line's provider, model version and price model.
type costModel struct{ provider, version, price string }

// costModels reads cost_models.sql: each mp_no's provider and models.
func costModels(ctx context.Context, e *Engine) (map[int64]costModel, error) {
	rows, err := e.QueryFile(ctx, "cost_models.sql", nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]costModel{}
	for rows.Next() {
		var n int64
		var c costModel
		if err := rows.Scan(&n, &c.provider, &c.version, &c.price); err != nil {
			return nil, fmt.Errorf("sql cost_models.sql: %w", err)
		}
		out[n] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sql cost_models.sql: %w", err)
	}
	return out, nil
}

// costCategories reads cost_categories.sql: the category names by number,
// which must be 0, 1, ...
func costCategories(ctx context.Context, e *Engine) ([]string, error) {
	return numberedNames(ctx, e, "cost_categories.sql", 0)
}

// costFiles lists the result files' raw_sha256 in out_no order (out_no 1 first).
func costFiles(ctx context.Context, e *Engine) ([]string, error) {
	return numberedNames(ctx, e, "cost_files.sql", 1)
}

// numberedNames reads the rows (n, name) of query file, which must number
// them first, first + 1, ... in order, and returns the names in that order.
func numberedNames(ctx context.Context, e *Engine, file string, first int64) ([]string, error) {
	rows, err := e.QueryFile(ctx, file, nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n int64
		var name string
		if err := rows.Scan(&n, &name); err != nil {
			return nil, fmt.Errorf("sql %s: %w", file, err)
		}
		if n != first+int64(len(out)) {
			return nil, fmt.Errorf("sql %s: number %d after %d", file, n, first+int64(len(out))-1)
		}
		out = append(out, name)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sql %s: %w", file, err)
	}
	return out, nil
}

// tmpFile is a local file later stored content-addressed.
type tmpFile struct{ o *lake.ObjectWriter }

func newTmpFile(dir, kind string) (*tmpFile, error) {
	o, err := lake.NewObjectWriter(dir, "batchlake-"+kind+"-*.jsonl")
	if err != nil {
		return nil, err
	}
	return &tmpFile{o: o}, nil
}

func (t *tmpFile) line(b []byte) error { return t.o.Line(b) }

func (t *tmpFile) commit(ctx context.Context, l *lake.Lake) (string, error) {
	key, _, err := t.o.Commit(ctx, l, lake.ObjectKey)
	return key, err
}

func (t *tmpFile) abort() { t.o.Abort() }
