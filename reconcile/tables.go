package reconcile

import (
	"context"
	"fmt"
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

// writeTables stores the job's outcomes and costs tables. Rows are scanned in
// column batches where the build allows (see eachRow) and handed to a writer
// goroutine (lake.TablePipe), so Parquet encoding (zstd) overlaps DuckDB's
// work instead of following it.
//
// Both tables are read in ranges of their sort key (chunks.go): DuckDB
// materialises a query's whole result before the first row comes out, so one
// ORDER BY over every row held them all in memory at once.
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

func writeTables(ctx context.Context, e *Engine, l *lake.Lake, m *lake.Manifest, job lake.Digest, tmp string, merged bool, modes map[string]string) (outcomes, costs string, err error) {
	ow, err := lake.NewTableWriter[lake.OutcomeRow](l, tmp, "outcomes", m.Tenant, job)
	if err != nil {
		return "", "", err
	}
	defer ow.Abort()
	opipe := lake.NewTablePipe(ctx, ow, pipeDepth)
	// record_id business_key shard_id custom_id attempt parent_job_key outcome disposition reason lines cost_usd truncated
	var last string // the previous row's record_id: rows must come in order
	for _, r := range recordRanges(m.ExpectedRecords, e.chunkRows) {
		r.Sort = merged
		err = e.eachRow(ctx, "outcome_rows.sql", r, "ssssnssssnmn", func(x *scanRow) error {
			s, n := x.s, x.n
			if s[0] <= last {
				return fmt.Errorf("reconcile: outcome rows out of record_id order: %q after %q", s[0], last)
			}
			last = s[0]
			return opipe.Add(lake.OutcomeRow{JobKey: m.JobKey, Tenant: m.Tenant, RecordID: s[0], BusinessKey: s[1], ShardID: s[2], CustomID: s[3],
				Attempt: int32(n[0]), ParentJobKey: s[4], Outcome: s[5], Disposition: s[6], Reason: s[7], Lines: int32(n[1]), CostUSD: x.m[0], Truncated: n[2] != 0})
		})
		if err != nil {
			break
		}
	}
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

// scanCosts reads a reconcile's costs table in ranges of costed's stored
// order (cost_scan.sql), naming each row's raw file from its out_no.
func scanCosts(ctx context.Context, e *Engine, m *lake.Manifest, inOrder func(out, line int64) error, cpipe *lake.TablePipe[lake.CostRow], modes map[string]string) error {
	raws, err := costFiles(ctx, e)
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
		// record_id custom_id attempt provider model_version category line_no price_model cost_usd out_no unpriced
		err = e.eachRow(ctx, "cost_scan.sql", r, "ssnsssnsmnn", func(x *scanRow) error {
			s, n := x.s, x.n
			if err := inOrder(n[2], n[1]); err != nil {
				return err
			}
			if n[2] < 1 || n[2] > int64(len(raws)) {
				return fmt.Errorf("reconcile: cost row of file %d, not in the job's %d files", n[2], len(raws))
			}
			return cpipe.Add(lake.CostRow{JobKey: m.JobKey, Tenant: m.Tenant, RecordID: s[0], CustomID: s[1], Attempt: int32(n[0]), Provider: s[2],
				ModelVersion: s[3], Category: s[4], RawSHA256: raws[n[2]-1], LineNo: n[1], PriceModel: s[5], CostUSD: x.m[0], Unpriced: n[3] != 0,
				Mode: fileModes[n[2]-1]})
		})
		if err != nil {
			return err
		}
	}
	return nil
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
