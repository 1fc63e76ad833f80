package lake

import (
	"context"
	"errors"
	"sync"
)

// probeState is this process's check that a remote lake's store refuses to
// overwrite (ProbeConditionalWrites): one per Lake, which every ledger of the
// lake shares. Its four round trips run once, in the background when a step
// starts them ahead (ProbeAhead), so that they overlap the step's reads
// instead of delaying its first append.
type probeState struct {
	mu  sync.Mutex
	run *probeRun // the probe in flight or finished; nil before the first
}

type probeRun struct {
	done chan struct{}
	err  error
}

// settled reports whether a finished probe's outcome stands: the store
// honours conditional writes, or it does not. A store or context error is
// no outcome: the next append probes again.
func (r *probeRun) settled() bool {
	return r.err == nil || errors.Is(r.err, ErrNoConditionalWrites)
}

// ProbeAhead starts, in the background, the check a remote lake's first
// ledger append waits for (ProbeConditionalWrites), unless it has run. A step
// that will append calls it before its reads; Close waits for it, so that
// its probe object is deleted before the process ends. A local lake needs
// no probe.
func (l *Lake) ProbeAhead(ctx context.Context) {
	if l.dir != "" {
		return
	}
	l.probe.start(ctx, l)
}

// conditionalWrites waits for the probe (starting it if none is in flight
// or settled) and returns its outcome.
func (l *Lake) conditionalWrites(ctx context.Context) error {
	for try := 0; ; try++ {
		r := l.probe.start(ctx, l)
		select {
		case <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		// A probe started under another caller's context, which ended, is
		// run again once under this one.
		if try == 0 && !r.settled() && (errors.Is(r.err, context.Canceled) || errors.Is(r.err, context.DeadlineExceeded)) {
			continue
		}
		return r.err
	}
}

func (p *probeState) start(ctx context.Context, l *Lake) *probeRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.run; r != nil {
		select {
		case <-r.done:
			if r.settled() {
				return r
			}
		default:
			return r
		}
	}
	r := &probeRun{done: make(chan struct{})}
	p.run = r
	go func() {
		defer close(r.done)
		r.err = ProbeConditionalWrites(ctx, l)
	}()
	return r
}

// wait waits for a probe in flight.
func (p *probeState) wait() {
	p.mu.Lock()
	r := p.run
	p.mu.Unlock()
	if r != nil {
		<-r.done
	}
}
