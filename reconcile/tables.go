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
// held them all in memory at once.
func writeTables(ctx context.Context, e *Engine, l *lake.Lake, m *lake.Manifest, job lake.Digest, tmp string, merged bool, modes map[string]string) (outcomes, costs string, err error) {
	if err := e.ExecFile(ctx, "keep_order.sql", nil); err != nil {
		return "", "", err
	}
	ow, err := lake.NewTableWriter[lake.OutcomeRow](l, tmp, "outcomes", m.Tenant, job)
	if err != nil {
		return "", "", err
	}
	defer ow.Abort()
	opipe := lake.NewTablePipe(ctx, ow, pipeDepth)
	err = writeOutcomes(ctx, e, m, opipe)
	if oerr := opipe.Close(err); err == nil {
		err = oerr
	}
	if err != nil {
		return "", "", err
	}
	// The outcomes file is stored before the costs are read (and so before
	// the costs file, the failpoint order crash tests rely on): its writer's
	// buffers are freed before the costs writer fills its own.
	start := time.Now()
	if outcomes, err = opipe.Commit(); err != nil {
		return "", "", err
	}
	logTiming("outcomes", "commit", start)
	failpoint.Hit(failpoint.ReconcileAfterOutcomes)

	cw, err := lake.NewTableWriter[lake.CostRow](l, tmp, "costs", m.Tenant, job)
	if err != nil {
		return "", "", err
	}
	defer cw.Abort()
	cpipe := lake.NewTablePipe(ctx, cw, pipeDepth)
	lastOut, lastLine := int64(-1), int64(-1) // the previous row's (out_no, line_no): rows must come in order
	inOrder := func(out, line int64) error {
		if out < lastOut || out == lastOut && line <= lastLine {
			return fmt.Errorf("reconcile: cost rows out of (file, line) order: %d:%d after %d:%d", out, line, lastOut, lastLine)
		}
		lastOut, lastLine = out, line
		return nil
	}
	if merged {
		err = mergeCosts(ctx, e, inOrder, cpipe, modes)
	} else {
		err = scanCosts(ctx, e, m, inOrder, cpipe, modes)
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
// (line_costs, merge_sources.sql), sorted one range of files and lines at a
// time (cost_rows.sql), as scanCosts reads a reconcile's, so that no single
// sort holds every line of the job.
func mergeCosts(ctx context.Context, e *Engine, inOrder func(out, line int64) error, cpipe *lake.TablePipe[lake.CostRow], modes map[string]string) error {
	ranges, err := costRanges(ctx, e, "line_costs", e.chunkRows)
	if err != nil {
		return err
	}
	for _, r := range ranges {
		// job_key tenant record_id custom_id attempt provider model_version category raw_sha256 line_no price_model cost_usd out_no unpriced
		err = e.eachRow(ctx, "cost_rows.sql", r, "ssssnssssnsmnn", func(x *scanRow) error {
			s, n := x.s, x.n
			if err := inOrder(n[2], n[1]); err != nil {
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

// writeOutcomes writes the outcomes table in the expected files' order: the
// files in the manifest's order, each one's rows in turn. The outcomes
// temp table is not sorted (outcomes.sql); each range of positions reads
// its narrow columns sorted (outcome_rows.sql) and the wide ones from the
// expected file itself, which holds them in that order (expected_rows.sql),
// and every row is checked to pair the same position on both sides.
func writeOutcomes(ctx context.Context, e *Engine, m *lake.Manifest, opipe *lake.TablePipe[lake.OutcomeRow]) error {
	paths, err := LocalFiles[lake.ExpectedRow](ctx, e, tableKeys(m.ExpectedTables()))
	if err != nil {
		return err
	}
	files, err := outcomeFiles(ctx, e, int64(len(paths)-1))
	if err != nil {
		return err
	}
	var (
		nar   outcomeCols
		total int64
	)
	for _, f := range files {
		file := []string{paths[0], paths[f.file]}
		for lo := int64(0); lo < f.n; lo += outcomeRangeRows * e.chunkRows {
			hi := min(lo+outcomeRangeRows*e.chunkRows, f.n)
			if err := nar.read(ctx, e, f.file<<40|lo, f.file<<40|hi); err != nil {
				return err
			}
			at := lo // the next row of the file
			for wlo := lo; wlo < hi; wlo += e.chunkRows {
				r := map[string]any{"Path": sqlList(file), "Lo": wlo, "Hi": min(wlo+e.chunkRows, hi)}
				// file_row_number rid record_id business_key shard_id custom_id attempt parent_job_key
				err := e.eachRow(ctx, "expected_rows.sql", r, "nnssssns", func(x *scanRow) error {
					s, n := x.s, x.n
					i := at - lo
					if n[0] != at || i >= int64(len(nar.pos)) || nar.pos[i] != f.file<<40|at || nar.rid[i] != n[1] {
						return fmt.Errorf("reconcile: expected file %d row %d (record %s) does not pair with its outcome (row %d, outcome %s)",
							f.file, at, s[0], n[0], nar.at(i))
					}
					at++
					return opipe.Add(lake.OutcomeRow{JobKey: m.JobKey, Tenant: m.Tenant, RecordID: s[0], BusinessKey: s[1], ShardID: s[2], CustomID: s[3],
						Attempt: int32(n[2]), ParentJobKey: s[4], Outcome: nar.outcome[i], Disposition: nar.disposition[i], Reason: nar.reason[i],
						Lines: nar.lines[i], CostUSD: nar.cost[i], Truncated: nar.truncated[i]})
				})
				if err != nil {
					return err
				}
			}
			if at != hi {
				return fmt.Errorf("reconcile: expected file %d has %d rows from row %d, its outcomes %d", f.file, at-lo, lo, hi-lo)
			}
			total += hi - lo
		}
	}
	if total != m.ExpectedRecords {
		return fmt.Errorf("reconcile: %d outcome rows written, the job expects %d records", total, m.ExpectedRecords)
	}
	return nil
}

// outcomeRangeRows is how many wide reads (expected_rows.sql, of
// EngineOptions.ChunkRows rows) one narrow read (outcome_rows.sql) serves.
// A narrow read decompresses most of the unsorted outcomes table when a
// large job's rows are spread over it (at 10M the join that builds it
// spills), so fewer, larger ones cost less cpu, but hold more: at 10M, one
// per file (16 chunks) took about 7 of 14 cpu s off the narrow reads and
// raised reconcile's peak RSS from 768–770 MiB to 840–1 046 MiB, past the
// 1 GiB a task is given.
const outcomeRangeRows = 4

// outcomeCols holds a range of outcome_rows.sql, each row at its place.
type outcomeCols struct {
	pos, rid                     []int64
	outcome, disposition, reason []string
	lines                        []int32
	cost                         []lake.Money
	truncated                    []bool
	seen                         []bool
}

// read replaces c's rows by those at positions lo <= pos < hi, each at
// index pos - lo, checking that each position comes once.
func (c *outcomeCols) read(ctx context.Context, e *Engine, lo, hi int64) error {
	n := int(hi - lo)
	c.pos, c.rid, c.lines, c.cost = resize(c.pos, n), resize(c.rid, n), resize(c.lines, n), resize(c.cost, n)
	c.outcome, c.disposition, c.reason = resize(c.outcome, n), resize(c.disposition, n), resize(c.reason, n)
	c.truncated, c.seen = resize(c.truncated, n), resize(c.seen, n)
	clear(c.seen)
	got := 0
	// pos rid outcome disposition reason lines cost_usd truncated
	err := e.eachRow(ctx, "outcome_rows.sql", map[string]any{"Lo": lo, "Hi": hi}, "nnsssnmn", func(x *scanRow) error {
		s, v := x.s, x.n
		i := v[0] - lo
		if i < 0 || i >= int64(n) || c.seen[i] {
			return fmt.Errorf("reconcile: two outcomes of expected file %d row %d", v[0]>>40, v[0]&(1<<40-1))
		}
		c.seen[i] = true
		got++
		c.pos[i], c.rid[i] = v[0], v[1]
		c.outcome[i], c.disposition[i], c.reason[i] = s[0], s[1], s[2]
		c.lines[i], c.cost[i], c.truncated[i] = int32(v[2]), x.m[0], v[3] != 0
		return nil
	})
	if err != nil {
		return err
	}
	if got != n {
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

// at names row i's position and record hash.
func (c *outcomeCols) at(i int64) string {
	if i < int64(len(c.pos)) {
		return fmt.Sprintf("of file %d row %d, record hash %d", c.pos[i]>>40, c.pos[i]&(1<<40-1), c.rid[i])
	}
	return "none"
}

// fileRows is how many outcomes an expected file (its number in the
// manifest's list, from 1) has.
type fileRows struct{ file, n int64 }

// outcomeFiles lists each expected file's outcomes (outcome_ranges.sql),
// checking that they number its rows from 0 and that the file is one of the
// job's files (1..files).
func outcomeFiles(ctx context.Context, e *Engine, files int64) ([]fileRows, error) {
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
		if first != 0 || last != f.n-1 {
			return nil, fmt.Errorf("reconcile: expected file %d has %d outcomes for its rows %d to %d", f.file, f.n, first, last)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sql outcome_ranges.sql: %w", err)
	}
	return out, nil
}

// scanCosts reads a reconcile's costs table in ranges of costed's stored
// order (cost_scan.sql), naming each row's raw file from its out_no and its
// provider and models from its mp_no.
func scanCosts(ctx context.Context, e *Engine, m *lake.Manifest, inOrder func(out, line int64) error, cpipe *lake.TablePipe[lake.CostRow], modes map[string]string) error {
	raws, err := costFiles(ctx, e)
	if err != nil {
		return err
	}
	models, err := costModels(ctx, e)
	if err != nil {
		return err
	}
	ranges, err := costRanges(ctx, e, "costed", e.chunkRows)
	if err != nil {
		return err
	}
	fileModes := make([]string, len(raws)) // by out_no - 1: one lookup per file, not per line
	for i, raw := range raws {
		fileModes[i] = modeOf(modes, raw)
	}
	for _, r := range ranges {
		// record_id custom_id attempt category line_no cost_usd out_no unpriced mp_no
		err = e.eachRow(ctx, "cost_scan.sql", r, "ssnsnmnnn", func(x *scanRow) error {
			s, n := x.s, x.n
			if err := inOrder(n[2], n[1]); err != nil {
				return err
			}
			if n[2] < 1 || n[2] > int64(len(raws)) {
				return fmt.Errorf("reconcile: cost row of file %d, not in the job's %d files", n[2], len(raws))
			}
			mp, ok := models[n[4]]
			if !ok {
				return fmt.Errorf("reconcile: cost row of file %d line %d has no provider and model (mp_no %d)", n[2], n[1], n[4])
			}
			return cpipe.Add(lake.CostRow{JobKey: m.JobKey, Tenant: m.Tenant, RecordID: s[0], CustomID: s[1], Attempt: int32(n[0]), Provider: mp.provider,
				ModelVersion: mp.version, Category: s[2], RawSHA256: raws[n[2]-1], LineNo: n[1], PriceModel: mp.price, CostUSD: x.m[0], Unpriced: n[3] != 0,
				Mode: fileModes[n[2]-1]})
		})
		if err != nil {
			return err
		}
	}
	return nil
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

// costFiles lists the result files' raw_sha256 in out_no order (out_no 1 first).
func costFiles(ctx context.Context, e *Engine) ([]string, error) {
	rows, err := e.QueryFile(ctx, "cost_files.sql", nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var raws []string
	for rows.Next() {
		var n int64
		var raw string
		if err := rows.Scan(&n, &raw); err != nil {
			return nil, fmt.Errorf("sql cost_files.sql: %w", err)
		}
		if n != int64(len(raws))+1 {
			return nil, fmt.Errorf("sql cost_files.sql: out_no %d after %d", n, len(raws))
		}
		raws = append(raws, raw)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sql cost_files.sql: %w", err)
	}
	return raws, nil
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
