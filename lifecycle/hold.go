package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchlake/batchlake/lake"
)

// errLeaseLost is the cause of a held call's cancellation.
var errLeaseLost = errors.New("the shard's lease was lost")

// holder keeps a shard's SUBMITTING lease alive while a long provider call
// (the upload) runs: every third of the lease it appends a renewal directly
// after its own last event, a conditional create that fails if another
// submitter took the shard over. It cancels the call's context when a
// renewal loses, or when the lease would run out (less the guard) before a
// renewal succeeded.
type holder struct {
	d      *Driver
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{}
	done   chan struct{}
	ev     lake.Event // the holder's last event; read after done
	lost   error
}

func (d *Driver) hold(parent context.Context, ev lake.Event) *holder {
	ctx, cancel := context.WithCancelCause(parent)
	h := &holder{d: d, ctx: ctx, cancel: cancel, stop: make(chan struct{}), done: make(chan struct{}), ev: ev}
	go h.run(parent, time.Now())
	return h
}

func (h *holder) run(parent context.Context, renewed time.Time) {
	defer close(h.done)
	lease := h.d.Lease
	for {
		deadline := renewed.Add(lease - h.d.guard())
		t := time.NewTimer(time.Until(renewed.Add(lease / 3)))
		select {
		case <-h.stop:
			t.Stop()
			return
		case <-parent.Done():
			t.Stop()
			return
		case <-t.C:
		}
		for {
			if time.Now().After(deadline) {
				h.fail(fmt.Errorf("%w: no renewal succeeded before it ran out", errLeaseLost))
				return
			}
			start := time.Now()
			ev, err := h.d.Ledger.AppendAfter(parent, h.ev, lake.Submitting, lease, "", map[string]string{"target": h.d.Target, "lease": "renewed during upload"})
			if err == nil {
				h.ev, renewed = ev, start
				break
			}
			if errors.Is(err, lake.ErrConflict) || errors.Is(err, lake.ErrNotHolder) {
				h.fail(fmt.Errorf("%w: renewal: %v", errLeaseLost, err))
				return
			}
			// A transient ledger failure: try again until the lease runs out.
			select {
			case <-h.stop:
				return
			case <-parent.Done():
				return
			case <-time.After(max(lease/20, 10*time.Millisecond)):
			}
		}
	}
}

func (h *holder) fail(err error) {
	h.lost = err
	h.cancel(err)
}

// finish stops the heartbeat and returns the holder's last event, or why the
// lease was lost.
func (h *holder) finish() (lake.Event, error) {
	close(h.stop)
	<-h.done
	h.cancel(nil)
	return h.ev, h.lost
}
