package lake

import (
	"context"
	"sync"
)

// readAhead reads a list of keys in order, several at once and at most a
// window of keys ahead of the one its reader takes: for a check that opens
// markers one at a time in a known order, each read is a file open on a
// local lake and a round trip on an object store, and the reader then waits
// only for the first.
type readAhead struct {
	idx    map[string]int
	res    []chan fetched
	next   int // the reader's place in the list
	tokens chan struct{}
	cancel context.CancelFunc
	done   chan struct{} // closed when no read is under way or will start
}

type fetched struct {
	data []byte
	err  error
}

// readAheadWindow is how far ahead of its reader a read-ahead reads.
const readAheadWindow = 256

// readersAtOnce is how many small objects to read at once: a few keep a
// local lake's cores busy; on an object store each read is a round trip,
// mostly waiting, so as many are in flight as of a step's ledgers.
func (l *Lake) readersAtOnce() int {
	if _, local := l.LocalDir(); local {
		return 8
	}
	return LedgerFanout
}

// newReadAhead starts reading keys; stop it when done with them.
func (l *Lake) newReadAhead(ctx context.Context, keys []string) *readAhead {
	ctx, cancel := context.WithCancel(ctx)
	r := &readAhead{idx: make(map[string]int, len(keys)), res: make([]chan fetched, len(keys)),
		tokens: make(chan struct{}, readAheadWindow), cancel: cancel, done: make(chan struct{})}
	for i, k := range keys {
		if _, dup := r.idx[k]; !dup {
			r.idx[k] = i
		}
		r.res[i] = make(chan fetched, 1)
	}
	readers := l.readersAtOnce()
	go func() {
		defer close(r.done)
		var wg sync.WaitGroup
		defer wg.Wait()
		sem := make(chan struct{}, readers)
		for i, k := range keys {
			select {
			case r.tokens <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				b, err := l.readAll(ctx, k)
				r.res[i] <- fetched{b, err}
			}()
		}
	}()
	return r
}

// get returns what reading key gave, if key is on the list at or after the
// reader's place (ok false otherwise: read it directly). The keys before it
// are passed over.
func (r *readAhead) get(key string) (data []byte, err error, ok bool) {
	if r == nil {
		return nil, nil, false
	}
	i, on := r.idx[key]
	if !on || i < r.next {
		return nil, nil, false
	}
	for ; r.next <= i; r.next++ {
		f := r.take(r.next)
		select {
		case <-r.tokens:
		default:
		}
		data, err = f.data, f.err
	}
	return data, err, true
}

// take waits for the read of key i.
func (r *readAhead) take(i int) fetched {
	select {
	case f := <-r.res[i]:
		return f
	case <-r.done:
		select {
		case f := <-r.res[i]:
			return f
		default:
			return fetched{err: context.Canceled} // never started: stopped
		}
	}
}

// stop ends the reads under way and waits for them.
func (r *readAhead) stop() {
	r.cancel()
	<-r.done
}
