package lake

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"

	"github.com/parquet-go/parquet-go"
	"golang.org/x/sync/errgroup"
)

// Parquet files are written deterministically: the same rows give the same
// bytes whatever the library version, so a table file's name (its sha256) is
// stable across re-runs and upgrades. created_by names the table format
// (TableVersion), not the library.
const (
	createdBy    = "batchlake"
	rowGroupRows = 128 * 1024
)

var createdByVer = strconv.Itoa(TableVersion)

// TableWriter streams rows of one table into a local temporary Parquet file;
// Commit uploads it under its content digest.
type TableWriter[T any] struct {
	lake   *Lake
	table  string
	tenant string
	job    Digest
	o      *ObjectWriter
	w      *parquet.GenericWriter[T]
	rows   int64
	// groupRows bounds the file's row groups.
	groupRows int64
	// fill is the column whose value the commit fills in (FillLater), and
	// value that value once known (filled).
	fill, value string
	filled      bool
	// copy, when set (CopyColumns), takes columns from other table files.
	copy *copySpec
	// A split writer (NewSplitTableWriter) has no file of its own: it hands
	// each row to the writer of its bucket, in batches.
	split   int
	id      func(*T) string
	tmpDir  string
	buckets []*TableWriter[T]
	pending [][]T
	// The buckets' files are encoded on workers (bucket b on worker
	// b % len(work)), so that Parquet encoding, most of a split writer's
	// cpu, does not hold up the goroutine that produces the rows. Each
	// bucket still gets its rows in the same batches and order, so its file
	// is the same bytes as when written on one goroutine.
	work    []chan splitBatchOf[T]
	free    chan []T
	wg      sync.WaitGroup
	mu      sync.Mutex
	workErr error
}

// splitBatchOf is one batch of a bucket's rows, for its worker.
type splitBatchOf[T any] struct {
	b    int
	rows []T
}

// splitStores is how many of a split table's files are stored at a time into
// a remote lake (a sixteenth of a table each).
const splitStores = 8

// splitBatch is how many rows a split writer collects per bucket before it
// writes them.
const splitBatch = 512

// NewTableWriter starts a table file in tmpDir ("" for the system default).
func NewTableWriter[T any](l *Lake, tmpDir, table, tenant string, job Digest) (*TableWriter[T], error) {
	return newTableWriter[T](l, tmpDir, table, tenant, job, rowGroupRows, "")
}

func newTableWriter[T any](l *Lake, tmpDir, table, tenant string, job Digest, groupRows int64, fill string) (*TableWriter[T], error) {
	newObject := NewObjectWriter
	if fill != "" {
		newObject = NewUnhashedObjectWriter
	}
	o, err := newObject(tmpDir, "batchlake-"+table+"-*.parquet")
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", table, err)
	}
	o.writeBehindFor(l)
	w := parquet.NewGenericWriter[T](o, tableWriterOptions(groupRows)...)
	return &TableWriter[T]{lake: l, table: table, tenant: tenant, job: job, o: o, w: w, fill: fill, tmpDir: tmpDir, groupRows: groupRows}, nil
}

// tableWriterOptions are the Parquet writer's settings of every table file.
func tableWriterOptions(groupRows int64) []parquet.WriterOption {
	return []parquet.WriterOption{
		parquet.CreatedBy(createdBy, createdByVer, ""),
		parquet.Compression(tableCodec),
		parquet.MaxRowsPerRowGroup(groupRows),
		parquet.PageBufferSize(256 * 1024),
		// Each page's min and max are kept once, in the column index, not
		// again in its header: the engines that prune pages read the index,
		// and working them out twice was a fiftieth of reconcile's cpu.
		parquet.DataPageStatistics(false),
	}
}

// FillLater makes column, a string column of the table, one whose value is
// known only at the commit: the rows are written with it empty, Fill gives
// the value, and Commit (or CommitSplit) gives it to every row (see
// fillColumn). Call it before the first row is written.
func (t *TableWriter[T]) FillLater(column string) error {
	if t.rows > 0 || t.copy != nil {
		return fmt.Errorf("table %s: internal error: FillLater after rows were written, or of a table with copied columns", t.table)
	}
	t.fill = column
	if t.split > 0 {
		return nil
	}
	o, err := NewUnhashedObjectWriter(t.tmpDir, "batchlake-"+t.table+"-*.parquet")
	if err != nil {
		return fmt.Errorf("table %s: %w", t.table, err)
	}
	o.writeBehindFor(t.lake)
	t.o.Abort()
	t.o = o
	t.w.Reset(o)
	return nil
}

// Fill gives the FillLater column its value, and the table the job it is
// stored under (the column being the job key, the writer was started before
// it was known). Commit fills the column in.
func (t *TableWriter[T]) Fill(job Digest, value string) {
	// A split writer's workers may still be starting buckets' files, under
	// the job as it was.
	t.mu.Lock()
	defer t.mu.Unlock()
	t.job, t.value, t.filled = job, value, true
}

// NewSplitTableWriter starts a table split into split files by partition
// (see Partition): each row goes to the file of bucket IDPartition(id(row),
// split), in the order written. Commit it with CommitSplit.
func NewSplitTableWriter[T any](l *Lake, tmpDir, table, tenant string, job Digest, split int, id func(*T) string) *TableWriter[T] {
	t := &TableWriter[T]{lake: l, table: table, tenant: tenant, job: job, split: split, id: id, tmpDir: tmpDir,
		buckets: make([]*TableWriter[T], split), pending: make([][]T, split)}
	workers := min(runtime.GOMAXPROCS(0), split)
	if workers < 2 {
		return t
	}
	// Two batches queued per worker keep it busy; the free list bounds the
	// rows held in batches to about 3 per worker plus one per bucket.
	t.free = make(chan []T, 3*workers+split)
	t.work = make([]chan splitBatchOf[T], workers)
	for w := range t.work {
		ch := make(chan splitBatchOf[T], 2)
		t.work[w] = ch
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			for bt := range ch {
				if t.err() == nil {
					if err := t.writeBucket(bt.b, bt.rows); err != nil {
						t.mu.Lock()
						t.workErr = err
						t.mu.Unlock()
					}
				}
				clear(bt.rows) // drop the strings for the GC
				select {
				case t.free <- bt.rows[:0]:
				default:
				}
			}
		}()
	}
	return t
}

// err is the first error of a split writer's workers.
func (t *TableWriter[T]) err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.workErr
}

// stop ends a split writer's workers (once) after the batches sent, and
// returns their first error.
func (t *TableWriter[T]) stop() error {
	for _, ch := range t.work {
		close(ch)
	}
	t.work = nil
	t.wg.Wait()
	return t.err()
}

// Write appends rows.
func (t *TableWriter[T]) Write(rows ...T) error {
	if t.split > 0 {
		// The rows' ids are hashed two at a time (IDHash2), each row then
		// handed on in order.
		for i := 0; i < len(rows); i += 2 {
			var h [2]uint32
			n := min(2, len(rows)-i)
			if n == 2 {
				h[0], h[1] = IDHash2(t.id(&rows[i]), t.id(&rows[i+1]))
			} else {
				h[0] = IDHash(t.id(&rows[i]))
			}
			for j := range n {
				b := HashPartition(h[j], t.split)
				t.pending[b] = append(t.pending[b], rows[i+j])
				if len(t.pending[b]) >= splitBatch {
					if err := t.flush(b); err != nil {
						return err
					}
				}
			}
		}
		t.rows += int64(len(rows))
		return nil
	}
	if t.copy != nil {
		return t.writeCopied(rows)
	}
	if _, err := t.w.Write(rows); err != nil {
		return fmt.Errorf("table %s: %w", t.table, err)
	}
	t.rows += int64(len(rows))
	return nil
}

// flush writes bucket b's pending rows to its file (started on first use),
// or hands them to the bucket's worker.
// A writer holds its current row group in memory, so the buckets' row
// groups are an eighth of a whole table's: the 16 together hold about twice
// one unsplit writer's. Their page buffers (256 KiB a column) add about 65
// MiB to ingest's peak RSS; 64 KiB pages would save it, but made the files
// 8 % larger (zstd compresses a page at a time).
func (t *TableWriter[T]) flush(b int) error {
	if len(t.pending[b]) == 0 {
		return nil
	}
	if t.work != nil {
		if err := t.err(); err != nil {
			return err
		}
		t.work[b%len(t.work)] <- splitBatchOf[T]{b: b, rows: t.pending[b]}
		select {
		case t.pending[b] = <-t.free:
		default:
			t.pending[b] = make([]T, 0, splitBatch)
		}
		return nil
	}
	err := t.writeBucket(b, t.pending[b])
	clear(t.pending[b])
	t.pending[b] = t.pending[b][:0]
	return err
}

// writeBucket writes rows to bucket b's file, started on first use.
func (t *TableWriter[T]) writeBucket(b int, rows []T) error {
	if t.buckets[b] == nil {
		t.mu.Lock()
		job := t.job
		t.mu.Unlock()
		w, err := newTableWriter[T](t.lake, t.tmpDir, t.table, t.tenant, job, rowGroupRows/8, t.fill)
		if err != nil {
			return err
		}
		t.buckets[b] = w
	}
	return t.buckets[b].Write(rows...)
}

// CommitSplit commits each bucket's file of a split writer and returns their
// keys and buckets, in bucket order (a bucket without rows has no file).
func (t *TableWriter[T]) CommitSplit(ctx context.Context) (keys []string, buckets []int, err error) {
	defer t.Abort()
	if t.split == 0 {
		return nil, nil, fmt.Errorf("table %s: internal error: CommitSplit of a table that is not split", t.table)
	}
	for b := range t.split {
		if err := t.flush(b); err != nil {
			return nil, nil, err
		}
	}
	if t.work != nil {
		if err := t.stop(); err != nil {
			return nil, nil, err
		}
	}
	if t.filled {
		for _, w := range t.buckets {
			if w != nil {
				w.Fill(t.job, t.value)
			}
		}
	}
	// Closing a bucket's file encodes its last pages: the files are closed
	// and stored on every core, as their batches were encoded, and into a
	// remote lake, where a store is mostly waiting, splitStores at a time.
	bucketKeys := make([]string, t.split)
	g, gctx := errgroup.WithContext(ctx)
	limit := runtime.GOMAXPROCS(0)
	if _, local := t.lake.LocalDir(); !local {
		limit = max(limit, splitStores)
	}
	g.SetLimit(limit)
	for b, w := range t.buckets {
		if w == nil {
			continue
		}
		g.Go(func() error {
			key, err := w.Commit(gctx)
			bucketKeys[b] = key
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	for b, w := range t.buckets {
		if w != nil {
			keys, buckets = append(keys, bucketKeys[b]), append(buckets, b)
		}
	}
	return keys, buckets, nil
}

// Rows is the number of rows written so far.
func (t *TableWriter[T]) Rows() int64 { return t.rows }

// Commit finishes the file and stores it write-once under its digest (in a
// local lake the file itself, see PutTempFile). It returns the lake key (""
// if no rows were written: empty tables are not stored).
func (t *TableWriter[T]) Commit(ctx context.Context) (string, error) {
	return t.commit(ctx, false)
}

// CommitObject finishes the file and stores it write-once as a
// content-addressed object (ObjectKey), even with no rows: for files that
// are not a table of the lake but read by the key a later step is given (a
// reconcile partition's partial tables).
func (t *TableWriter[T]) CommitObject(ctx context.Context) (string, error) {
	return t.commit(ctx, true)
}

func (t *TableWriter[T]) commit(ctx context.Context, object bool) (string, error) {
	defer t.Abort()
	if t.split > 0 {
		return "", fmt.Errorf("table %s: internal error: Commit of a split table (CommitSplit)", t.table)
	}
	if err := t.w.Close(); err != nil {
		return "", fmt.Errorf("table %s: %w", t.table, err)
	}
	if t.fill != "" {
		if !t.filled {
			return "", fmt.Errorf("table %s: internal error: Commit before the value of column %s is known", t.table, t.fill)
		}
		schema := t.w.Schema()
		if err := t.o.Rewrite(func(f *os.File) (int64, error) {
			return fillColumn(f, schema, tableWriterOptions(t.groupRows), t.fill, t.value)
		}); err != nil {
			return "", fmt.Errorf("table %s: %w", t.table, err)
		}
	}
	if c := t.copy; c != nil {
		if c.next != len(c.groups) {
			return "", fmt.Errorf("table %s: %d rows written, the files its columns are copied from hold more", t.table, t.rows)
		}
		shell, err := t.o.written()
		if err != nil {
			return "", fmt.Errorf("table %s: %w", t.table, err)
		}
		o, err := NewObjectWriter(t.tmpDir, "batchlake-"+t.table+"-*.parquet")
		if err != nil {
			return "", fmt.Errorf("table %s: %w", t.table, err)
		}
		o.writeBehindFor(t.lake)
		err = assembleCopied(shell, c, o)
		t.o.Abort()
		t.o = o
		if err != nil {
			return "", fmt.Errorf("table %s: copying columns: %w", t.table, err)
		}
	}
	key := ObjectKey
	if !object {
		if t.rows == 0 {
			return "", nil
		}
		key = func(d Digest) string { return TableFileKey(t.table, t.tenant, t.job, d) }
	}
	k, _, err := t.o.Commit(ctx, t.lake, key)
	if err != nil {
		return "", fmt.Errorf("table %s: %w", t.table, err)
	}
	return k, nil
}

// Abort removes the temporary file; safe after Commit.
func (t *TableWriter[T]) Abort() {
	if t.work != nil {
		t.stop()
	}
	if t.o != nil {
		t.o.Abort()
	}
	for _, w := range t.buckets {
		if w != nil {
			w.Abort()
		}
	}
}

// WriteTable writes rows as one table file and commits it.
func WriteTable[T any](ctx context.Context, l *Lake, tmpDir, table, tenant string, job Digest, rows []T) (string, error) {
	w, err := NewTableWriter[T](l, tmpDir, table, tenant, job)
	if err != nil {
		return "", err
	}
	for i := 0; i < len(rows); i += 4096 {
		end := min(i+4096, len(rows))
		if err := w.Write(rows[i:end]...); err != nil {
			w.Abort()
			return "", err
		}
	}
	return w.Commit(ctx)
}
