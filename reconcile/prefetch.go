package reconcile

import (
	"context"
	"fmt"
	"slices"

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
// ahead, shard by shard in the retry's order, until limit bytes are held.
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
		shards := map[string]*prefetched{}
		var arena []byte
		held := 0
		for _, w := range want {
			s, ok := m.Shard(w.id)
			if !ok || ctx.Err() != nil {
				break
			}
			pf, n, ok := readAhead(ctx, l, s, w.offs, &arena, limit-held)
			if !ok {
				break
			}
			shards[w.id], held = pf, held+n
		}
		p.shards = shards
	}()
	return p, nil
}

// readAhead reads the lines of shard s at offs, copied into *arena, if they
// fit in limit bytes; ok is false otherwise or on any failure.
func readAhead(ctx context.Context, l *lake.Lake, s lake.ManifestShard, offs []int64, arena *[]byte, limit int) (pf *prefetched, n int, ok bool) {
	src, err := openLines(ctx, l, lake.ObjectKey(s.Object), s.Bytes, offs)
	if err != nil {
		return nil, 0, false
	}
	defer src.Close()
	pf = &prefetched{offs: offs, lines: make([][]byte, 0, len(offs))}
	for _, off := range offs {
		line, err := src.lineAt(off)
		if err != nil || n+len(line) > limit || ctx.Err() != nil {
			return nil, 0, false
		}
		if cap(*arena)-len(*arena) < len(line) {
			*arena = make([]byte, 0, max(1<<20, len(line)))
		}
		start := len(*arena)
		*arena = append(*arena, line...)
		pf.lines = append(pf.lines, (*arena)[start:len(*arena):len(*arena)])
		n += len(line)
	}
	return pf, n, true
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
