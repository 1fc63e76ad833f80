package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/batchlake/batchlake/lake"
)

// defaultPrefetchBytes bounds the retry lines read ahead: at 1M records the
// retry set's lines are about 20 MB, at 10M about ten times that, of which
// the rest are read after the tables as before.
const defaultPrefetchBytes = 48 << 20

// retryPrefetch holds retry lines read from the input shards while the
// outcomes and costs tables are written. Those are cpu work and the retry's
// reads mostly a wait for the disk (past the page cache), so reading the
// lines then hides that wait. The reads wait parked (lake.DirectReader), so
// they take no core from the tables' writers: a read that held its P while
// it waited slowed the tables' pass by about what the retry saved. It only
// saves reads: the retry checks every line it takes from here exactly as one
// it reads itself, and reads what is not here (a failed read ahead is
// forgotten, and the retry's own read says what is wrong).
type retryPrefetch struct {
	cancel context.CancelFunc
	done   chan struct{}
	shards map[string]*prefetched // complete shards only; set when done is closed
}

// prefetched is one shard's wanted lines, in offset order.
type prefetched struct {
	offs  []int64
	lines [][]byte
}

// startRetryPrefetch queries where the retry's lines start and reads them
// ahead, prefetchShards shards at a time in the retry's order, as long as
// they fit in limit bytes.
// The query runs before it returns (a session has one connection). Nothing
// is read (nil) unless all of the lines are likely to fit, by their shards'
// mean line length: a large job's tables are read from the disk as they are
// written, and a read ahead of part of its lines beside them (at 10M, the
// first 48 MiB of them) made the tables' pass slower by more than the retry
// saved (30.6-31.4 s against 30.0-31.0).
func startRetryPrefetch(ctx context.Context, e *Engine, l *lake.Lake, m *lake.Manifest, limit int) (*retryPrefetch, error) {
	type shardOffs struct {
		id   string
		offs []int64
	}
	var want []shardOffs
	rows, err := e.QueryFile(ctx, "retry_offsets.sql", nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var off int64
		if err := rows.Scan(&id, &off); err != nil {
			return nil, fmt.Errorf("sql retry_offsets.sql: %w", err)
		}
		if len(want) == 0 || want[len(want)-1].id != id {
			want = append(want, shardOffs{id: id})
		}
		w := &want[len(want)-1]
		w.offs = append(w.offs, off)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sql retry_offsets.sql: %w", err)
	}
	var guess int64
	for _, w := range want {
		if s, ok := m.Shard(w.id); ok && s.Records > 0 {
			guess += int64(len(w.offs)) * s.Bytes / s.Records
		}
	}
	if guess > int64(limit) {
		return nil, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &retryPrefetch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		var (
			mu     sync.Mutex
			shards = map[string]*prefetched{}
			budget atomic.Int64
		)
		budget.Store(int64(limit))
		// Several shards at once: each read waits for the disk parked, and
		// one shard after another, one read at a time, read 11 or 12 of a 1M
		// job's 20 shards while its tables were written.
		g, gctx := errgroup.WithContext(ctx)
		if _, local := l.LocalDir(); local {
			g.SetLimit(prefetchShards)
		} else {
			g.SetLimit(remoteRetryReads) // each read a round trip or more
		}
		for _, w := range want {
			s, ok := m.Shard(w.id)
			if !ok || gctx.Err() != nil {
				break
			}
			g.Go(func() error {
				pf, ok := readAhead(gctx, l, s, w.offs, &budget)
				if !ok {
					return errPrefetchStopped // and the shards not read yet are not read
				}
				mu.Lock()
				shards[w.id] = pf
				mu.Unlock()
				return nil
			})
		}
		g.Wait()
		p.shards = shards
	}()
	return p, nil
}

// prefetchShards is how many shards of a local lake are read ahead at once.
const prefetchShards = 4

// errPrefetchStopped ends the read ahead at a shard it could not take whole.
var errPrefetchStopped = errors.New("read ahead stopped")

// readAhead reads the lines of shard s at offs, taking their bytes from
// budget; ok is false, and the bytes given back, if they do not fit or on any
// failure.
func readAhead(ctx context.Context, l *lake.Lake, s lake.ManifestShard, offs []int64, budget *atomic.Int64) (pf *prefetched, ok bool) {
	src, err := openLines(ctx, l, lake.ObjectKey(s.Object), s.Bytes, offs)
	if err != nil {
		return nil, false
	}
	defer src.Close()
	pf = &prefetched{offs: offs, lines: make([][]byte, 0, len(offs))}
	// The lines are copied into blocks sized by the shard's mean line, so
	// that many shards of few lines each do not hold a mostly empty block
	// apiece.
	var arena []byte
	block := 64 << 10
	if s.Records > 0 {
		block = int(min(int64(len(offs))*(s.Bytes/s.Records+1), 1<<20)) + 64<<10
	}
	var taken int64 // from budget, given back if the shard is not taken
	giveBack := func() (*prefetched, bool) {
		budget.Add(taken)
		return nil, false
	}
	for _, off := range offs {
		line, err := src.lineAt(off)
		if err != nil || ctx.Err() != nil {
			return giveBack()
		}
		taken += int64(len(line))
		if budget.Add(-int64(len(line))) < 0 {
			return giveBack()
		}
		if cap(arena)-len(arena) < len(line) {
			arena = make([]byte, 0, max(block, len(line)))
			block = 64 << 10 // past the estimate, small blocks
		}
		start := len(arena)
		arena = append(arena, line...)
		pf.lines = append(pf.lines, arena[start:len(arena):len(arena)])
	}
	return pf, true
}

// wait stops the read ahead where it is (or, with finish, lets it end) and
// returns the shards it read whole (nil p: none). A second call returns
// the same.
func (p *retryPrefetch) wait(finish bool) map[string]*prefetched {
	if p == nil {
		return nil
	}
	if !finish {
		p.cancel()
	}
	<-p.done
	p.cancel()
	return p.shards
}

// lineAt is the line of a prefetched shard starting at off, if read ahead.
func (pf *prefetched) lineAt(off int64) ([]byte, bool) {
	if pf == nil {
		return nil, false
	}
	i, ok := slices.BinarySearch(pf.offs, off)
	if !ok {
		return nil, false
	}
	return pf.lines[i], true
}
