package reconcile

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lake/failpoint"
)

// writeTables stores the job's outcomes and costs tables. Rows are scanned in
// column batches where the build allows (see eachRow) and handed to a writer
// goroutine (lake.TablePipe), so Parquet encoding (zstd) overlaps DuckDB's
// work instead of following it.
//
// Both tables are read in ranges of their sort key (chunks.go): DuckDB
// materialises a query's whole result before the first row comes out, so one
// ORDER BY over every row held them all in memory at once.
func writeTables(ctx context.Context, e *Engine, l *lake.Lake, m *lake.Manifest, job lake.Digest, tmp string, merged bool) (outcomes, costs string, err error) {
	ow, err := lake.NewTableWriter[lake.OutcomeRow](l, tmp, "outcomes", m.Tenant, job)
	if err != nil {
		return "", "", err
	}
	defer ow.Abort()
	opipe := lake.NewTablePipe(ctx, ow)
	// record_id business_key shard_id custom_id attempt parent_job_key outcome disposition reason lines cost_usd
	var last string // the previous row's record_id: rows must come in order
	for _, r := range recordRanges(m.ExpectedRecords, chunkRows) {
		r.Sort = merged
		err = e.eachRow(ctx, "outcome_rows.sql", r, "ssssnssssns", func(x *scanRow) error {
			s, n := x.s, x.n
			if s[0] <= last {
				return fmt.Errorf("reconcile: outcome rows out of record_id order: %q after %q", s[0], last)
			}
			last = s[0]
			return opipe.Add(lake.OutcomeRow{JobKey: m.JobKey, Tenant: m.Tenant, RecordID: s[0], BusinessKey: s[1], ShardID: s[2], CustomID: s[3],
				Attempt: int32(n[0]), ParentJobKey: s[4], Outcome: s[5], Disposition: s[6], Reason: s[7], Lines: int32(n[1]), CostUSD: trimDecimal(s[8])})
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
	cpipe := lake.NewTablePipe(ctx, cw)
	lastOut, lastLine := int64(-1), int64(-1) // the previous row's (out_no, line_no): rows must come in order
	inOrder := func(out, line int64) error {
		if out < lastOut || out == lastOut && line <= lastLine {
			return fmt.Errorf("reconcile: cost rows out of (file, line) order: %d:%d after %d:%d", out, line, lastOut, lastLine)
		}
		lastOut, lastLine = out, line
		return nil
	}
	if merged {
		// The partitions' costs: a merge's out_no is a window over all its
		// lines, so one query, sorted.
		// job_key tenant record_id custom_id attempt provider model_version category raw_sha256 line_no price_model cost_usd out_no
		err = e.eachRow(ctx, "cost_rows.sql", nil, "ssssnssssnssn", func(x *scanRow) error {
			s, n := x.s, x.n
			if err := inOrder(n[2], n[1]); err != nil {
				return err
			}
			return cpipe.Add(lake.CostRow{JobKey: s[0], Tenant: s[1], RecordID: s[2], CustomID: s[3], Attempt: int32(n[0]), Provider: s[4],
				ModelVersion: s[5], Category: s[6], RawSHA256: s[7], LineNo: n[1], PriceModel: s[8], CostUSD: trimDecimal(s[9])})
		})
	} else {
		err = scanCosts(ctx, e, m, inOrder, cpipe)
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

// scanCosts reads a reconcile's costs table in ranges of costed's stored
// order (cost_scan.sql), naming each row's raw file from its out_no.
func scanCosts(ctx context.Context, e *Engine, m *lake.Manifest, inOrder func(out, line int64) error, cpipe *lake.TablePipe[lake.CostRow]) error {
	raws, err := costFiles(ctx, e)
	if err != nil {
		return err
	}
	ranges, err := costRanges(ctx, e, "costed", chunkRows)
	if err != nil {
		return err
	}
	for _, r := range ranges {
		// record_id custom_id attempt provider model_version category line_no price_model cost_usd out_no
		err = e.eachRow(ctx, "cost_scan.sql", r, "ssnsssnssn", func(x *scanRow) error {
			s, n := x.s, x.n
			if err := inOrder(n[2], n[1]); err != nil {
				return err
			}
			if n[2] < 1 || n[2] > int64(len(raws)) {
				return fmt.Errorf("reconcile: cost row of file %d, not in the job's %d files", n[2], len(raws))
			}
			return cpipe.Add(lake.CostRow{JobKey: m.JobKey, Tenant: m.Tenant, RecordID: s[0], CustomID: s[1], Attempt: int32(n[0]), Provider: s[2],
				ModelVersion: s[3], Category: s[4], RawSHA256: raws[n[2]-1], LineNo: n[1], PriceModel: s[5], CostUSD: trimDecimal(s[6])})
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

// writeRetry writes the retry shards (provider-ready, original request bodies,
// new custom ids for the next attempt) and the lineage file. Shards are
// streamed once each, in order, since the retry set comes sorted by shard and line.
func writeRetry(ctx context.Context, e *Engine, l *lake.Lake, m *lake.Manifest, tmp string) (shards []string, lineage string, err error) {
	f, err := ingest.FormatFor(m.Provider)
	if err != nil {
		return nil, "", err
	}
	rows, err := e.QueryFile(ctx, "retry_set.sql", nil)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	type want struct {
		lin  ingest.Lineage
		line int64
		old  string
	}
	var (
		out      *tmpFile
		outRecs  int
		outBytes int64
		lin      *tmpFile
		cur      string
		sc       *bufio.Scanner
		rc       io.ReadCloser
		at       int64
	)
	defer func() {
		if rc != nil {
			rc.Close()
		}
	}()
	if lin, err = newTmpFile(tmp, "lineage"); err != nil {
		return nil, "", err
	}
	defer lin.abort()
	flush := func() error {
		if out == nil {
			return nil
		}
		key, err := out.commit(ctx, l)
		if err != nil {
			return err
		}
		shards = append(shards, key)
		out, outRecs, outBytes = nil, 0, 0
		return nil
	}
	for rows.Next() {
		var w want
		var shard string
		var attempt int32
		if err := rows.Scan(&w.lin.RecordID, &w.lin.BusinessKey, &w.old, &shard, &w.line, &attempt, &w.lin.RetryReason); err != nil {
			return nil, "", fmt.Errorf("sql retry_set.sql: %w", err)
		}
		if shard != cur {
			if rc != nil {
				// Drain so the shard's digest is verified to the end.
				for sc.Scan() {
				}
				if err := sc.Err(); err != nil {
					return nil, "", err
				}
				rc.Close()
			}
			s, ok := m.Shard(shard)
			if !ok {
				return nil, "", fmt.Errorf("retry: shard %s not in manifest", shard)
			}
			if rc, err = l.OpenVerified(ctx, lake.ObjectKey(s.Object), s.Object); err != nil {
				return nil, "", err
			}
			sc = bufio.NewScanner(rc)
			sc.Buffer(make([]byte, 1<<20), ingest.MaxLineBytes)
			cur, at = shard, 0
		}
		for at < w.line {
			if !sc.Scan() {
				if err := sc.Err(); err != nil {
					return nil, "", fmt.Errorf("retry: read shard %s: %w", shard, err)
				}
				return nil, "", fmt.Errorf("retry: shard %s has no line %d: %w", shard, w.line, lake.ErrCorrupt)
			}
			at++
		}
		next := int(attempt) + 1
		w.lin.CustomID = ingest.RetryCustomID(next, w.lin.RecordID)
		w.lin.Attempt = next
		w.lin.ParentJobKey = m.JobKey
		w.lin.ParentShardID = shard
		line, err := f.WithCustomID(sc.Bytes(), w.lin.CustomID)
		if err != nil {
			return nil, "", fmt.Errorf("retry: shard %s line %d: %w", shard, w.line, err)
		}
		if out != nil && (outRecs >= m.ShardMaxRecords || outBytes+int64(len(line))+1 > m.ShardMaxBytes) {
			if err := flush(); err != nil {
				return nil, "", err
			}
		}
		if out == nil {
			if out, err = newTmpFile(tmp, "retry"); err != nil {
				return nil, "", err
			}
			defer out.abort()
		}
		if err := out.line(line); err != nil {
			return nil, "", err
		}
		outRecs++
		outBytes += int64(len(line)) + 1
		lj := struct {
			ingest.Lineage
			ParentCustomID string `json:"parent_custom_id"`
		}{w.lin, w.old}
		b, _ := json.Marshal(lj)
		if err := lin.line(b); err != nil {
			return nil, "", err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	if err := flush(); err != nil {
		return nil, "", err
	}
	lineage, err = lin.commit(ctx, l)
	return shards, lineage, err
}

// tmpFile is a local file later stored content-addressed.
type tmpFile struct {
	f *os.File
	w *bufio.Writer
}

func newTmpFile(dir, kind string) (*tmpFile, error) {
	f, err := os.CreateTemp(dir, "batchlake-"+kind+"-*.jsonl")
	if err != nil {
		return nil, err
	}
	return &tmpFile{f: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

func (t *tmpFile) line(b []byte) error {
	t.w.Write(b)
	return t.w.WriteByte('\n')
}

func (t *tmpFile) commit(ctx context.Context, l *lake.Lake) (string, error) {
	if err := t.w.Flush(); err != nil {
		return "", err
	}
	if err := t.f.Close(); err != nil {
		return "", err
	}
	d, _, err := l.PutFile(ctx, t.f.Name(), lake.ObjectKey)
	if err != nil {
		return "", err
	}
	os.Remove(t.f.Name())
	return lake.ObjectKey(d), nil
}

func (t *tmpFile) abort() {
	t.f.Close()
	os.Remove(t.f.Name())
}
