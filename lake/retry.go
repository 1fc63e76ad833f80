package lake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"
	"gocloud.dev/gcerrors"
)

// RetryPolicy says how the lake retries object-store operations that are safe
// to repeat: reads, listings, existence checks and write-once puts (a put is
// conditional and content-addressed, so a repeat either creates the object or
// finds the same bytes already there). Only transient errors are retried; see
// transient.
type RetryPolicy struct {
	// Initial is the first wait between attempts; it doubles (with jitter)
	// up to MaxInterval.
	Initial     time.Duration
	MaxInterval time.Duration
	// MaxElapsed bounds the time spent on one operation, waits included.
	MaxElapsed time.Duration
	// MaxAttempts bounds the attempts of one operation; 0 means no bound but
	// MaxElapsed, 1 turns retries off.
	MaxAttempts uint
	// AttemptTimeout bounds one attempt (one request and its body); an
	// attempt that runs past it is abandoned and retried. 0 means no bound.
	AttemptTimeout time.Duration
	// Notify, if set, is called before each retry with the operation
	// ("read", "put", "list", "exists"), the key or prefix, the attempt that
	// failed (1-based) and its error.
	Notify func(op, key string, attempt int, err error)
}

// DefaultRetry is the policy of a lake returned by Open.
var DefaultRetry = RetryPolicy{
	Initial:        50 * time.Millisecond,
	MaxInterval:    2 * time.Second,
	MaxElapsed:     20 * time.Second,
	AttemptTimeout: 10 * time.Minute,
}

// policy returns the lake's retry policy, the default when it is unset.
func (l *Lake) policy() RetryPolicy {
	if l.Retry.Initial <= 0 && l.Retry.MaxAttempts == 0 {
		p := DefaultRetry
		p.Notify = l.Retry.Notify
		return p
	}
	return l.Retry
}

// retry runs fn until it succeeds, fails with an error that is not
// transient, or the policy's budget runs out. fn gets a context bounded by
// the attempt timeout. Errors from fn are returned as they are, except when
// retries ran out: then the error says so, "lake <op> <key>: gave up after N
// attempts over D: <last error>".
func retry[T any](ctx context.Context, l *Lake, op, key string, fn func(ctx context.Context) (T, error)) (T, error) {
	p := l.policy()
	start := time.Now()
	attempts := 0
	var last error
	b := &backoff.ExponentialBackOff{
		InitialInterval:     p.Initial,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         p.MaxInterval,
	}
	if b.InitialInterval <= 0 {
		b.InitialInterval = DefaultRetry.Initial
	}
	if b.MaxInterval < b.InitialInterval {
		b.MaxInterval = b.InitialInterval
	}
	opts := []backoff.RetryOption{backoff.WithBackOff(b), backoff.WithMaxElapsedTime(p.MaxElapsed)}
	if p.MaxAttempts > 0 {
		opts = append(opts, backoff.WithMaxTries(p.MaxAttempts))
	}
	if p.Notify != nil {
		opts = append(opts, backoff.WithNotify(func(err error, _ time.Duration) { p.Notify(op, key, attempts, err) }))
	}
	res, err := backoff.Retry(ctx, func() (T, error) {
		attempts++
		actx, cancel := ctx, context.CancelFunc(func() {})
		if p.AttemptTimeout > 0 {
			actx, cancel = context.WithTimeout(ctx, p.AttemptTimeout)
		}
		defer cancel()
		v, err := fn(actx)
		if err == nil {
			return v, nil
		}
		last = err
		if !transient(ctx, err) {
			return v, backoff.Permanent(err)
		}
		return v, err
	}, opts...)
	if err == nil {
		return res, nil
	}
	if last != nil && transient(ctx, last) && ctx.Err() == nil {
		return res, &GaveUpError{Op: op, Key: key, Attempts: attempts, Elapsed: time.Since(start), Last: last}
	}
	return res, err
}

// GaveUpError is returned when an operation still failed with a transient
// error after the retry policy's last attempt.
type GaveUpError struct {
	Op, Key  string
	Attempts int
	Elapsed  time.Duration
	Last     error
}

func (e *GaveUpError) Error() string {
	return fmt.Sprintf("lake %s %s: gave up after %d attempts over %s: %v", e.Op, e.Key, e.Attempts, e.Elapsed.Round(time.Millisecond), e.Last)
}

func (e *GaveUpError) Unwrap() error { return e.Last }

// wrapOp prefixes err with the operation and key, unless it already says
// that it gave up on them.
func wrapOp(op, key string, err error) error {
	var g *GaveUpError
	if err == nil || errors.As(err, &g) {
		return err
	}
	return fmt.Errorf("lake %s %s: %w", op, key, err)
}

// permanentErr marks an error that no retry can help (a local file that
// does not open, corrupt bytes).
type permanentErr struct{ err error }

func (e permanentErr) Error() string { return e.err.Error() }
func (e permanentErr) Unwrap() error { return e.err }

// transient reports whether err, returned by an object-store operation while
// ctx was live, may go away when the operation is repeated: a server error,
// a throttle, an attempt that timed out, a reset or cut connection (s3blob
// reports 500 and 503 SlowDown as Unknown; gcerrors has no Unavailable). Not
// found, precondition, argument and permission errors, corrupt bytes and a
// cancelled or expired caller context are final.
func transient(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	var pe permanentErr
	if errors.As(err, &pe) || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	switch gcerrors.Code(err) {
	case gcerrors.Internal, gcerrors.Unknown, gcerrors.ResourceExhausted, gcerrors.DeadlineExceeded:
		return true
	}
	return false
}
