package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lake/failpoint"
)

// errRestart stops a read that wrote its expected rows early (earlyExpected)
// at a record it cannot take that way: the plan reads the input again, the
// records into sorted runs.
var errRestart = errors.New("plan: read again, sorting the records")

// earlyExpected writes the expected rows of an input read in key order with
// the custom ids as keys (blgen's, a sorted export's) as the records are read,
// instead of keeping the records in sorted runs and writing the rows from
// them once the last is read. The rows all carry the job key, known only then:
// the table is written with it empty and filled in when it is stored
// (lake.TableWriter.FillLater). A record out of key order, a bad line or a
// key other than the custom id ends the read with errRestart; a retry job,
// or one whose shards are balanced over a minimum of records, is not read
// this way at all.
//
// A job under SplitMinRecords has one expected file and a larger one a split
// table, and which it is shows only at the end: the first SplitMinRecords rows
// are kept in memory, and written as one file if no more come. The files are
// the same bytes as writeShards writes for the same rows.
type earlyExpected struct {
	ctx context.Context
	l   *lake.Lake
	o   *PlanOptions
	n   int64
	// rows are the rows kept until the table's writer starts (w, pipe), in
	// blocks of keptBlock: one slice grown by doubling copied them again and
	// again into fresh memory, about 0.1 of a 1M plan's 3.5 cpu s.
	rows   [][]lake.ExpectedRow
	w      *lake.TableWriter[lake.ExpectedRow]
	pipe   *lake.TablePipe[lake.ExpectedRow]
	closed bool // pipe is closed
	est    *estimator
	hexes  hexArena
	cfgHex hexMemo
}

// newEarlyExpected starts the rows of a plan, or returns nil where the plan
// cannot write them early: a retry job's (its records carry lineage, and are
// keyed by their business keys), or one whose shards are balanced over a
// minimum of records once every record is known.
func newEarlyExpected(ctx context.Context, l *lake.Lake, o *PlanOptions) (*earlyExpected, error) {
	if o.reread || o.noEarly || o.Lineage != nil || o.MinRecords > 0 {
		return nil, nil
	}
	e := &earlyExpected{ctx: ctx, l: l, o: o, est: newEstimator(o.Estimate)}
	if o.splitMin() == 0 { // never split: one file from the first row
		w, err := lake.NewTableWriter[lake.ExpectedRow](l, o.TmpDir, "expected", o.Tenant, lake.Digest{})
		if err != nil {
			return nil, err
		}
		if err := e.start(w); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// start makes w, its job key column filled in later, the rows' writer, and
// hands it the rows kept so far.
func (e *earlyExpected) start(w *lake.TableWriter[lake.ExpectedRow]) error {
	if err := w.FillLater("job_key"); err != nil {
		w.Abort()
		return err
	}
	// The rows are encoded on another goroutine while this one parses: a
	// steady stream, so two batches of slack keep the writer busy.
	e.w, e.pipe = w, lake.NewTablePipe(e.ctx, w, 2)
	for _, block := range e.rows {
		for _, r := range block {
			if err := e.pipe.Add(r); err != nil {
				return err
			}
		}
	}
	e.rows = nil
	return nil
}

// keptBlock is how many expected rows a block of those kept holds.
const keptBlock = 4096

// add writes the expected row of r, just written to shard sw.
func (e *earlyExpected) add(r *planRec, sw *shardWriter) error {
	o := e.o
	row := lake.ExpectedRow{
		Tenant: o.Tenant, ShardID: sw.id, ShardLine: sw.records, ShardOffset: sw.bytes - int64(r.n) - 1,
		RecordID: e.hexes.of(r.rid), BusinessKey: r.key, CustomID: r.customID, Attempt: int32(o.Attempt),
		ParentJobKey: o.ParentJobKey, RequestSHA256: e.hexes.of(r.req), ModelConfigHash: e.cfgHex.of(r.cfg), InputLine: r.line,
	}
	row.EstInputTokens, row.EstOutputTokens = e.est.add(int64(r.n), r.out)
	e.n++
	if e.pipe != nil {
		return e.pipe.Add(row)
	}
	if n := len(e.rows); n == 0 || len(e.rows[n-1]) == cap(e.rows[n-1]) {
		e.rows = append(e.rows, make([]lake.ExpectedRow, 0, keptBlock))
	}
	last := &e.rows[len(e.rows)-1]
	*last = append(*last, row)
	if e.n < e.o.splitMin() {
		return nil
	}
	return e.start(lake.NewSplitTableWriter(e.l, o.TmpDir, "expected", o.Tenant, lake.Digest{}, lake.SplitBuckets,
		func(r *lake.ExpectedRow) string { return r.CustomID }))
}

// abort removes what was written.
func (e *earlyExpected) abort() {
	if e == nil || e.w == nil {
		return
	}
	if !e.closed {
		e.pipe.Close(errRestart)
	}
	e.w.Abort()
	e.w, e.pipe = nil, nil
}

// commit stores the shards written while reading (written, cut in turn as
// writeShards would cut them) and the expected rows, their job key filled
// in, and records them in m.
func (e *earlyExpected) commit(ctx context.Context, m *lake.Manifest, written []*shardWriter) error {
	job, err := lake.ParseDigest(m.JobKey)
	if err != nil {
		return err
	}
	// Into a remote lake the shards are stored several at a time.
	stores := lake.NewStores[lake.ManifestShard](ctx, e.l)
	for _, sw := range written {
		if err := stores.Go(func(ctx context.Context) (lake.ManifestShard, error) { return sw.commit(ctx, e.l) }); err != nil {
			break
		}
	}
	shards, err := stores.Wait()
	if err != nil {
		return err
	}
	var records int64
	for _, s := range shards {
		m.Shards = append(m.Shards, s)
		records += s.Records
	}
	if records != e.n || e.n != m.ExpectedRecords {
		return fmt.Errorf("plan: internal error: %d records in the shards, %d expected rows, %d records planned", records, e.n, m.ExpectedRecords)
	}
	if e.pipe == nil {
		// Under SplitMinRecords: one file of the rows kept.
		rows := slices.Concat(e.rows...)
		for i := range rows {
			rows[i].JobKey = m.JobKey
		}
		key, err := lake.WriteTable(ctx, e.l, e.o.TmpDir, "expected", m.Tenant, job, rows)
		if err != nil {
			return err
		}
		m.ExpectedFiles = []string{key}
	} else {
		e.closed = true
		if err := e.pipe.Close(nil); err != nil {
			return err
		}
		e.w.Fill(job, m.JobKey)
		if e.o.splitMin() > 0 {
			if m.ExpectedFiles, m.ExpectedBuckets, err = e.pipe.CommitSplit(); err != nil {
				return err
			}
			m.ExpectedSplit = lake.SplitBuckets
		} else {
			key, err := e.pipe.Commit()
			if err != nil {
				return err
			}
			m.ExpectedFiles = []string{key}
		}
		e.w, e.pipe = nil, nil
	}
	if e.o.reads != nil {
		e.o.reads(true, 0, 0, 0)
	}
	if e.o.wroteEarly != nil {
		e.o.wroteEarly()
	}
	failpoint.Hit(failpoint.PlanAfterExpected)
	m.Estimate = &e.est.sum
	return nil
}
