package lake

import "context"

// TablePipe feeds a TableWriter from another goroutine, so that Parquet
// encoding (zstd) overlaps the caller's work instead of following it: Add
// collects rows into batches, the goroutine encodes them; Close waits for it
// and Commit stores the file. Close must be called once the rows are added
// (also after an error, to stop the goroutine).
type TablePipe[T any] struct {
	ctx   context.Context
	w     *TableWriter[T]
	batch []T
	ch    chan []T   // full batches to the writer
	free  chan []T   // emptied batches back
	done  chan error // the writer's result, once ch is closed
	spare int        // batches not yet allocated
	err   error
}

// pipeBatch is how many rows go to the Parquet writer at a time.
const pipeBatch = 4096

// NewTablePipe starts the goroutine that writes to w. depth (at least 1) is
// how many full batches of pipeBatch rows may wait for it: the memory a caller
// that fills batches in bursts trades for keeping the writer busy between them.
// Batches are allocated as they are needed, so a small table costs the memory
// of its rows, not depth batches.
func NewTablePipe[T any](ctx context.Context, w *TableWriter[T], depth int) *TablePipe[T] {
	depth = max(depth, 1)
	p := &TablePipe[T]{ctx: ctx, w: w, ch: make(chan []T, depth), free: make(chan []T, depth+1), done: make(chan error, 1), spare: depth}
	go func() {
		var err error
		for b := range p.ch {
			if err == nil {
				err = w.Write(b...)
			}
			clear(b) // drop the strings for the GC
			p.free <- b[:0]
		}
		p.done <- err
	}()
	return p
}

// Add appends a row. A write error shows at Close.
func (p *TablePipe[T]) Add(row T) error {
	// The first batch grows with its rows; the ones after it start full size.
	p.batch = append(p.batch, row)
	if len(p.batch) < pipeBatch {
		return nil
	}
	// After a write error the goroutine keeps draining (and reports the
	// error at Close), so this never blocks for good.
	p.ch <- p.batch
	select {
	case p.batch = <-p.free:
	default:
		if p.spare > 0 {
			p.spare--
			p.batch = make([]T, 0, pipeBatch)
		} else {
			p.batch = <-p.free
		}
	}
	return nil
}

// Close sends the last batch and waits for the writer; addErr (the caller's
// error, if any) leaves the last batch unwritten.
func (p *TablePipe[T]) Close(addErr error) error {
	if addErr == nil && len(p.batch) > 0 {
		p.ch <- p.batch
	}
	close(p.ch)
	p.err = <-p.done
	return p.err
}

// CommitSplit stores the files of a split writer (after Close), as
// TableWriter.CommitSplit.
func (p *TablePipe[T]) CommitSplit() ([]string, []int, error) {
	if p.err != nil {
		return nil, nil, p.err
	}
	return p.w.CommitSplit(p.ctx)
}

// Commit stores the file (after Close) and returns its lake key.
func (p *TablePipe[T]) Commit() (string, error) {
	if p.err != nil {
		return "", p.err
	}
	return p.w.Commit(p.ctx)
}

// CommitObject stores the file (after Close) as TableWriter.CommitObject.
func (p *TablePipe[T]) CommitObject() (string, error) {
	if p.err != nil {
		return "", p.err
	}
	return p.w.CommitObject(p.ctx)
}
