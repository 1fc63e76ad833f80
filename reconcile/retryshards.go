package reconcile

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// defaultRetryReadBytes bounds the input shard bytes being read for the
// retry at once (Options.RetryReadBytes): a shard's retry lines are at most
// its bytes, plus the new custom ids.
const defaultRetryReadBytes = 128 << 20

// remoteRetryReads is how many input shards of a remote lake the retry reads
// ahead of the one it writes (within the bytes of RetryReadBytes): each read
// is a round trip or more to the object store.
const remoteRetryReads = 16

// shardRetry is one input shard's part of the retry set, in shard_line
// order, and once a worker has read the shard its retry lines and lineage.
type shardRetry struct {
	s       lake.ManifestShard
	wants   []retryWant
	reserve int64 // taken from the budget until the lines are written
	lines   [][]byte
	lineage [][]byte
	done    chan error
	pre     *prefetched // the lines read ahead, if the shard's were
	// prefetched, if set, counts the lines taken from pre (tests).
	prefetched *atomic.Int64
}

// retryWant is one row of retry_set.sql.
type retryWant struct {
	lin     ingest.Lineage
	line    int64
	old     string
	attempt int32
	off     int64  // where the line starts in its shard; -1 if the expected row does not say
	digest  string // the record's request digest
}

// writeRetry writes the retry shards (provider-ready, original request bodies,
// new custom ids for the next attempt) and the lineage file. The input shards
// are read, verified and their retry lines rewritten on every core, a few
// shards at a time; the lines are written in the retry set's order (shard,
// line), so the files are the same however the reads interleave. Lines read
// ahead (pre, by shard) are not read again.
func writeRetry(ctx context.Context, e *Engine, l *lake.Lake, m *lake.Manifest, o Options, pre map[string]*prefetched) (shards []string, lineage string, err error) {
	f, err := ingest.FormatFor(m.Provider)
	if err != nil {
		return nil, "", err
	}
	budgetBytes := o.RetryReadBytes
	if budgetBytes <= 0 {
		budgetBytes = defaultRetryReadBytes
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	budget := semaphore.NewWeighted(budgetBytes)
	// Shards read ahead of the one written: as many as there are cores, or
	// on a remote lake, where a read is mostly waiting, remoteRetryReads.
	ahead := runtime.GOMAXPROCS(0)
	if _, local := l.LocalDir(); !local {
		ahead = max(ahead, remoteRetryReads)
	}
	order := make(chan *shardRetry, ahead)
	g.Go(func() error {
		defer close(order)
		return eachRetryShard(gctx, e, m, o.retryQueryShard, func(sr *shardRetry) error {
			sr.pre, sr.prefetched = pre[sr.s.ShardID], o.retryPrefetched
			sr.reserve = min(max(sr.s.Bytes, 1), budgetBytes)
			if err := budget.Acquire(gctx, sr.reserve); err != nil {
				return err
			}
			sr.done = make(chan error, 1)
			select {
			case order <- sr:
			case <-gctx.Done():
				budget.Release(sr.reserve)
				return gctx.Err()
			}
			g.Go(func() error {
				if o.retryReadStart != nil {
					o.retryReadStart(sr.s.ShardID)
				}
				err := sr.read(gctx, l, m, f, o.retryWholeShards)
				sr.done <- err
				return err
			})
			return nil
		})
	})
	shards, lineage, werr := writeRetryFiles(ctx, gctx, l, m, o.TmpDir, order, budget)
	if werr != nil {
		cancel()
		for range order { // until the query's reader has stopped
		}
	}
	gerr := g.Wait()
	switch {
	case werr != nil && (gerr == nil || errors.Is(gerr, context.Canceled)):
		// The writer's own failure (the cancel above stopped the readers),
		// or a reader's failure that the writer received first.
		return nil, "", werr
	case gerr != nil:
		return nil, "", gerr
	case werr != nil:
		return nil, "", werr
	}
	return shards, lineage, nil
}

// eachRetryShard runs retry_set.sql and calls fn with each shard's rows;
// reached, if not nil, is called as the query reaches each shard's rows.
func eachRetryShard(ctx context.Context, e *Engine, m *lake.Manifest, reached func(shardID string) error, fn func(*shardRetry) error) error {
	rows, err := e.QueryFile(ctx, "retry_set.sql", nil)
	if err != nil {
		return err
	}
	defer rows.Close()
	var cur *shardRetry
	for rows.Next() {
		var w retryWant
		var shard string
		if err := rows.Scan(&w.lin.RecordID, &w.lin.BusinessKey, &w.old, &shard, &w.line, &w.attempt, &w.lin.RetryReason, &w.off, &w.digest); err != nil {
			return fmt.Errorf("sql retry_set.sql: %w", err)
		}
		if cur == nil || shard != cur.s.ShardID {
			if cur != nil {
				if err := fn(cur); err != nil {
					return err
				}
			}
			s, ok := m.Shard(shard)
			if !ok {
				return fmt.Errorf("retry: shard %s not in manifest", shard)
			}
			if reached != nil {
				if err := reached(shard); err != nil {
					return err
				}
			}
			cur = &shardRetry{s: s}
		}
		cur.wants = append(cur.wants, w)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sql retry_set.sql: %w", err)
	}
	if cur != nil {
		return fn(cur)
	}
	return nil
}

// read keeps each wanted line of the shard with its new custom id and its
// lineage row. Where the expected rows say where the lines start, it reads
// those lines alone (readLines); otherwise it streams the whole shard once,
// verifying the shard's digest to the end.
func (sr *shardRetry) read(ctx context.Context, l *lake.Lake, m *lake.Manifest, f ingest.Format, whole bool) error {
	if !whole && sr.byOffset() {
		return sr.readLines(ctx, l, m, f)
	}
	rc, err := l.OpenVerified(ctx, lake.ObjectKey(sr.s.Object), sr.s.Object)
	if err != nil {
		return err
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 1<<20), ingest.MaxLineBytes)
	shard := sr.s.ShardID
	var at int64
	for _, w := range sr.wants {
		for at < w.line {
			if !sc.Scan() {
				if err := sc.Err(); err != nil {
					return fmt.Errorf("retry: read shard %s: %w", shard, err)
				}
				return fmt.Errorf("retry: shard %s has no line %d: %w", shard, w.line, lake.ErrCorrupt)
			}
			at++
		}
		if err := sr.keep(m, f, w, sc.Bytes()); err != nil {
			return err
		}
	}
	// Drain so the shard's digest is verified to the end.
	for sc.Scan() {
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("retry: read shard %s: %w", shard, err)
	}
	return nil
}

// byOffset says whether every wanted line's start is known (expected rows
// of table format 6 on), in increasing order.
func (sr *shardRetry) byOffset() bool {
	last := int64(-1)
	for _, w := range sr.wants {
		if w.off <= last || w.digest == "" {
			return false
		}
		last = w.off
	}
	return len(sr.wants) > 0
}

// offsets are the wanted lines' starts, in order.
func (sr *shardRetry) offsets() []int64 {
	offs := make([]int64, len(sr.wants))
	for i, w := range sr.wants {
		offs[i] = w.off
	}
	return offs
}

// readLines reads only the wanted lines, each from where its expected row
// says it starts, and checks each against its record: the line must parse as
// a request of the job's format with the record's custom id and request
// digest (what plan computed from the same bytes). A shard's other lines are
// not read: at a few per cent of records to retry, hashing every byte of
// every shard was most of the retry's time.
func (sr *shardRetry) readLines(ctx context.Context, l *lake.Lake, m *lake.Manifest, f ingest.Format) error {
	key, shard := lake.ObjectKey(sr.s.Object), sr.s.ShardID
	var src shardLines // opened at the first line not read ahead
	defer func() {
		if src != nil {
			src.Close()
		}
	}()
	for _, w := range sr.wants {
		line, ok := sr.pre.lineAt(w.off)
		var err error
		switch {
		case ok && sr.prefetched != nil:
			sr.prefetched.Add(1)
		case !ok:
			if src == nil {
				if src, err = openLines(ctx, l, key, sr.s.Bytes, sr.offsets()); err != nil {
					return fmt.Errorf("retry: read shard %s: %w", shard, err)
				}
			}
			if line, err = src.lineAt(w.off); err != nil {
				return fmt.Errorf("retry: shard %s line %d (byte %d): %w", shard, w.line, w.off, err)
			}
		}
		rec, ierr := f.ParseInput(line, "")
		switch {
		case ierr != nil:
			err = fmt.Errorf("not a request: %s", ierr.Msg)
		case rec.CustomID != w.old:
			err = fmt.Errorf("custom_id %q, but the record's is %q", rec.CustomID, w.old)
		case rec.RequestDigest.Hex() != w.digest:
			err = fmt.Errorf("request digest %s, but the record's is %s", rec.RequestDigest.Hex()[:12], w.digest[:min(12, len(w.digest))])
		}
		if err != nil {
			return fmt.Errorf("retry: shard %s line %d (byte %d): %w: %w", shard, w.line, w.off, err, lake.ErrCorrupt)
		}
		if err := sr.keep(m, f, w, line); err != nil {
			return err
		}
	}
	return nil
}

// keep adds the wanted line w, with its new custom id, and its lineage row.
func (sr *shardRetry) keep(m *lake.Manifest, f ingest.Format, w retryWant, src []byte) error {
	shard := sr.s.ShardID
	next := int(w.attempt) + 1
	w.lin.CustomID = ingest.RetryCustomID(next, w.lin.RecordID)
	w.lin.Attempt = next
	w.lin.ParentJobKey = m.JobKey
	w.lin.ParentShardID = shard
	line, err := f.WithCustomID(src, w.lin.CustomID)
	if err != nil {
		return fmt.Errorf("retry: shard %s line %d: %w", shard, w.line, err)
	}
	lj := struct {
		ingest.Lineage
		ParentCustomID string `json:"parent_custom_id"`
	}{w.lin, w.old}
	b, err := json.Marshal(lj)
	if err != nil {
		return err
	}
	sr.lines = append(sr.lines, line)
	sr.lineage = append(sr.lineage, b)
	return nil
}

// writeRetryFiles writes the shards' retry lines in order into retry shards
// no larger than the job's shard limits, and their lineage into one file.
// readers is done when a reader or the retry-set query has failed: the
// lineage and the last retry shard are then not stored (the set would be
// short; shards filled before are stored but named by no report, as after a
// crash).
func writeRetryFiles(ctx, readers context.Context, l *lake.Lake, m *lake.Manifest, tmp string, order <-chan *shardRetry, budget *semaphore.Weighted) (shards []string, lineage string, err error) {
	var (
		out      *tmpFile
		outRecs  int
		outBytes int64
	)
	lin, err := newTmpFile(tmp, "lineage")
	if err != nil {
		return nil, "", err
	}
	defer lin.abort()
	defer func() {
		if out != nil {
			out.abort()
		}
	}()
	// A full retry shard is stored while the next is filled (lake.Stores);
	// on an early return, the stores in flight end first (the shards they
	// store are named by no report, as after a crash).
	stores := lake.NewStores[string](ctx, l)
	defer func() { _, _ = stores.Wait() }()
	flush := func() error {
		if out == nil {
			return nil
		}
		f := out
		out, outRecs, outBytes = nil, 0, 0
		return stores.Go(func(ctx context.Context) (string, error) { return f.commit(ctx, l) })
	}
	for sr := range order {
		if err := <-sr.done; err != nil {
			return nil, "", err
		}
		for i, line := range sr.lines {
			if out != nil && (outRecs >= m.ShardMaxRecords || outBytes+int64(len(line))+1 > m.ShardMaxBytes) {
				if err := flush(); err != nil {
					return nil, "", err
				}
			}
			if out == nil {
				if out, err = newTmpFile(tmp, "retry"); err != nil {
					return nil, "", err
				}
			}
			if err := out.line(line); err != nil {
				return nil, "", err
			}
			outRecs++
			outBytes += int64(len(line)) + 1
			if err := lin.line(sr.lineage[i]); err != nil {
				return nil, "", err
			}
		}
		budget.Release(sr.reserve)
	}
	if err := readers.Err(); err != nil {
		return nil, "", err
	}
	if err := flush(); err != nil {
		return nil, "", err
	}
	if shards, err = stores.Wait(); err != nil {
		return nil, "", err
	}
	lineage, err = lin.commit(ctx, l)
	return shards, lineage, err
}
