package lake

import (
	"cmp"
	"context"

	"golang.org/x/sync/errgroup"
)

// RemoteStores is how many finished files a step stores at a time into a
// remote lake while it writes the next: each is an upload.
const RemoteStores = 4

// Stores stores a step's finished files (plan's shards, reconcile's retry
// shards) while the step goes on writing the next. Into a remote lake up to
// RemoteStores run at a time in the background; into a local one, where a
// store is a link or a rename, each runs at once on the caller's goroutine.
// Wait returns the results in the order the stores were started.
type Stores[T any] struct {
	ctx    context.Context
	g      *errgroup.Group
	inline bool
	out    []*T
	err    error // an inline store's
}

// NewStores returns a Stores for files stored into l.
func NewStores[T any](ctx context.Context, l *Lake) *Stores[T] {
	s := &Stores[T]{ctx: ctx}
	if _, local := l.LocalDir(); local {
		s.inline = true
		return s
	}
	s.g, s.ctx = errgroup.WithContext(ctx)
	s.g.SetLimit(RemoteStores)
	return s
}

// Go starts store, or runs it at once on a local lake. It returns the error
// of a store that has already failed (the caller stops writing): a
// background store's, or this inline one's.
func (s *Stores[T]) Go(store func(ctx context.Context) (T, error)) error {
	if s.err != nil {
		return s.err
	}
	if err := s.ctx.Err(); err != nil {
		if s.g != nil {
			// A background store failed (its error cancelled s.ctx), or the
			// caller's ctx ended: the store's error says which file and why.
			if werr := s.g.Wait(); werr != nil {
				s.err = werr
			}
		}
		return cmp.Or(s.err, err)
	}
	r := new(T)
	s.out = append(s.out, r)
	if s.inline {
		*r, s.err = store(s.ctx)
		return s.err
	}
	s.g.Go(func() error {
		var err error
		*r, err = store(s.ctx)
		return err
	})
	return nil
}

// Wait waits for the stores started and returns their results in the order
// they were started, or the first error.
func (s *Stores[T]) Wait() ([]T, error) {
	if s.g != nil {
		if err := s.g.Wait(); err != nil {
			return nil, err
		}
	}
	if s.err != nil {
		return nil, s.err
	}
	out := make([]T, len(s.out))
	for i, r := range s.out {
		out[i] = *r
	}
	return out, nil
}
