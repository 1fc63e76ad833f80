package reconcile

import (
	"context"
	"fmt"
	"strings"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

// inFlight lists the shards of a job whose batches have not finished: a
// shard SUBMITTING or SUBMITTED, RUNNING while the provider's last word
// (provider_status) is not terminal, and, in a job with any tracked batch,
// a shard still VALIDATED (not sent yet). Their records have no result
// lines yet; reconciling now would call them missing and retry them while
// they may still succeed. A job whose shards were never submitted (results
// ingested from files) has none in flight. events are the shards' ledger
// events, in the manifest's order (Ledger.EventsOf).
func inFlight(m *lake.Manifest, events [][]lake.Event) []string {
	var flight, unsent []string
	tracked := false
	for i, s := range m.Shards {
		evs := events[i]
		if len(evs) == 0 {
			continue
		}
		status := ""
		for _, ev := range evs {
			if ev.State == lake.Submitting {
				tracked = true
			}
			if st := ev.Detail[lake.DetailProviderStatus]; st != "" {
				status = st
			}
		}
		switch evs[len(evs)-1].State {
		case lake.Submitting, lake.Submitted:
			flight = append(flight, s.ShardID)
		case lake.Running:
			if !lake.ProviderStatusTerminal(status) {
				flight = append(flight, s.ShardID)
			}
		case lake.Validated:
			unsent = append(unsent, s.ShardID)
		}
	}
	if tracked {
		flight = append(flight, unsent...)
	}
	return flight
}

// notYetError is reconcile's answer for a job with batches in flight: exit
// 75, try again once status and collect have seen every batch finish.
func notYetError(m *lake.Manifest, flight []string) error {
	names := flight
	if len(names) > 5 {
		names = append(names[:5:5], fmt.Sprintf("and %d more", len(flight)-5))
	}
	return fmt.Errorf("reconcile: job %s: %d of %d shards have batches not finished or not sent (%s); their records would be counted missing and retried while they may still succeed. "+
		"Run status and collect until every batch is terminal, then reconcile (or reconcile --allow-running for what has arrived: no missing record is retried): %w",
		m.JobKey, len(flight), len(m.Shards), strings.Join(names, ", "), errkind.ErrNotYet)
}

// errAllowRunningPartition: partitions and their merge need every batch
// finished; --allow-running is for a single reconcile.
var errAllowRunningPartition = &errkind.UsageError{Msg: "reconcile: --allow-running goes with a single reconcile, not --partition or --merge (they need every batch finished)"}

// holdMissing keeps the records with no result line yet out of the retry
// set and the manual queue (disposition pending): their batch may still
// deliver them; the next reconcile decides.
func holdMissing(ctx context.Context, e *Engine) error {
	return e.ExecFile(ctx, "hold_missing.sql", nil)
}
