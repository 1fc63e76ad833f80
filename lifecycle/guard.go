package lifecycle

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

// The checks a step makes before it talks to a provider about a job: the
// job's provider is the one in its manifest, and a shard bound to a batch
// of another provider is never polled, collected or submitted again. Submit
// also refuses a retry child that a newer retry superseded or that would
// send a record whose latest state is succeeded.

// checkProvider refuses a driver whose client talks to another provider
// than the one the job was planned for: simulated results never enter a job
// planned for a real provider, and a real provider never serves a sim job.
func (d *Driver) checkProvider(m *lake.Manifest) error {
	if d.Target != m.Provider {
		return &errkind.UsageError{Msg: fmt.Sprintf("job %s was planned for provider %s, but this step talks to %s: run it with --provider %s (or without --provider)",
			m.JobKey, m.Provider, d.Target, m.Provider)}
	}
	return nil
}

// wrongBinding is a shard bound (or being bound) to a batch of another
// provider than the job's: a SUBMITTING or SUBMITTED event whose target
// differs from the manifest's provider.
type wrongBinding struct {
	shard, target, batch string
	live                 bool // the shard is SUBMITTING, SUBMITTED or RUNNING
}

// wrongBindings lists the job's shards bound to a batch of the wrong kind.
func (d *Driver) wrongBindings(ctx context.Context, m *lake.Manifest) ([]wrongBinding, error) {
	job, err := lake.ParseDigest(m.JobKey)
	if err != nil {
		return nil, err
	}
	all, err := d.Ledger.EventsOf(ctx, job, m.ShardIDs())
	if err != nil {
		return nil, err
	}
	var out []wrongBinding
	for i, s := range m.Shards {
		evs := all[i]
		for _, ev := range evs {
			if t := ev.Detail["target"]; (ev.State == lake.Submitting || ev.State == lake.Submitted) && t != "" && t != m.Provider {
				last := evs[len(evs)-1]
				out = append(out, wrongBinding{shard: s.ShardID, target: t, batch: last.ProviderJobID,
					live: last.State == lake.Submitting || last.State == lake.Submitted || last.State == lake.Running})
				break
			}
		}
	}
	return out, nil
}

// wrongBindingError says which shards are bound to which provider's batches
// and the way out: cancel (which closes them in the ledger without calling
// any provider), then plan the records again as a new job.
func wrongBindingError(m *lake.Manifest, ws []wrongBinding) error {
	var names []string
	for _, w := range ws {
		b := w.batch
		if b == "" {
			b = "(a batch whose create went unanswered)"
		}
		names = append(names, fmt.Sprintf("%s -> %s batch %s", w.shard, w.target, b))
	}
	return &errkind.UsageError{Msg: fmt.Sprintf("job %s was planned for provider %s, but %d of its shards are bound to batches of another provider (%s): their results never count for this job. "+
		"Run `batchlake cancel --job %s` to close those shards (no provider is called; stop a real batch at its provider yourself, a simulated one costs nothing), "+
		"then plan the records again as a new job (for example with another --dataset-version) and submit that one",
		m.JobKey, m.Provider, len(ws), strings.Join(names, ", "), m.JobKey)}
}

// checkBindings refuses the step when a shard is bound to a batch of the
// wrong kind; with liveOnly, only shards still SUBMITTING, SUBMITTED or
// RUNNING count (cancel has closed the others).
func (d *Driver) checkBindings(ctx context.Context, m *lake.Manifest, liveOnly bool) error {
	ws, err := d.wrongBindings(ctx, m)
	if err != nil {
		return err
	}
	var bad []wrongBinding
	for _, w := range ws {
		if w.live || !liveOnly {
			bad = append(bad, w)
		}
	}
	if len(bad) > 0 {
		return wrongBindingError(m, bad)
	}
	return nil
}

// checkSubmit runs before Submit touches any shard: the provider and the
// bindings are the job's, the job is not a superseded retry child, and no
// record of a retry child has already succeeded elsewhere in its family.
func (d *Driver) checkSubmit(ctx context.Context, m *lake.Manifest) error {
	if err := d.checkProvider(m); err != nil {
		return err
	}
	if err := d.checkBindings(ctx, m, false); err != nil {
		return err
	}
	if m.ParentJobKey == "" {
		return nil
	}
	if newest, err := supersededBy(ctx, d.Lake, d.Ledger, m); err != nil || newest != "" {
		if err != nil {
			return err
		}
		return &errkind.UsageError{Msg: fmt.Sprintf("job %s is a retry of %s that a newer retry superseded: submit job %s instead (it holds the records still to do)",
			m.JobKey, m.ParentJobKey, newest)}
	}
	unsent, err := d.unsent(ctx, m)
	if err != nil || !unsent {
		return err
	}
	if err := checkParentReconciled(ctx, d.Lake, m); err != nil {
		return err
	}
	return checkNoneSucceeded(ctx, d.Lake, m)
}

// checkParentReconciled refuses a retry child whose parent's results changed
// after its latest reconcile (lake.Unreconciled): the child was made from
// a retry set that may hold records answered since.
func checkParentReconciled(ctx context.Context, l *lake.Lake, m *lake.Manifest) error {
	pd, err := lake.ParseDigest(m.ParentJobKey)
	if err != nil {
		return err
	}
	p, err := l.GetManifest(ctx, pd)
	if err != nil {
		return err
	}
	added, gone, err := lake.Unreconciled(ctx, l, p)
	if err != nil || len(added)+len(gone) == 0 {
		return err
	}
	return &errkind.UsageError{Msg: fmt.Sprintf("job %s is a retry of %s, whose results changed since its latest reconcile (%s): it may send again records answered since; nothing was submitted. Run `batchlake reconcile --job %s`, then `batchlake retry --job %s` for a child of the records still to do",
		m.JobKey, m.ParentJobKey, lake.UnreconciledText(added, gone), m.ParentJobKey, m.ParentJobKey)}
}

// unsent reports whether any shard of the job is still VALIDATED: only then
// would submit send records (a job already sent is only looked after).
func (d *Driver) unsent(ctx context.Context, m *lake.Manifest) (bool, error) {
	job, err := lake.ParseDigest(m.JobKey)
	if err != nil {
		return false, err
	}
	for _, s := range m.Shards {
		last, err := d.Ledger.Last(ctx, job, s.ShardID)
		if err != nil {
			return false, err
		}
		if last.State == lake.Validated {
			return true, nil
		}
	}
	return false, nil
}

// supersededBy returns the newest job in the chain of retries that
// superseded m ("" when m is not superseded).
func supersededBy(ctx context.Context, l *lake.Lake, g *lake.Ledger, m *lake.Manifest) (string, error) {
	newest := ""
	seen := map[string]bool{m.JobKey: true}
	for cur := m; cur != nil; {
		next, err := supersededOnce(ctx, g, cur)
		if err != nil || next == "" || seen[next] {
			return newest, err
		}
		seen[next], newest = true, next
		d, err := lake.ParseDigest(next)
		if err != nil {
			return newest, nil
		}
		if cur, err = l.GetManifest(ctx, d); err != nil {
			return newest, nil // the newer child is named; its manifest is its own problem
		}
	}
	return newest, nil
}

// supersededOnce returns the job named by a supersede event on any shard of m.
func supersededOnce(ctx context.Context, g *lake.Ledger, m *lake.Manifest) (string, error) {
	job, err := lake.ParseDigest(m.JobKey)
	if err != nil {
		return "", err
	}
	for _, s := range m.Shards {
		last, err := g.Last(ctx, job, s.ShardID)
		if err != nil {
			return "", err
		}
		if by := last.Detail[lake.DetailSupersededBy]; by != "" {
			return by, nil
		}
	}
	return "", nil
}

// checkNoneSucceeded refuses a retry child holding a record whose outcome
// is succeeded in the newest reconcile of its parent or of another job of
// the parent's retry family (a child made from an earlier, too early
// reconcile, or a sibling that already did the record).
func checkNoneSucceeded(ctx context.Context, l *lake.Lake, m *lake.Manifest) error {
	ids, err := lake.RecordIDs(ctx, l, m)
	if err != nil {
		return err
	}
	fam, err := lake.ReadFamily(ctx, l)
	if err != nil {
		return err
	}
	// Every other job of the retry tree: the parent, its other descendants,
	// and the ancestors above it (late results ingested there).
	var jobs []*lake.Manifest
	for _, k := range fam.Tree(m.JobKey) {
		if fam.IsDescendant(k, m.JobKey) {
			continue // the child's own children: made after it
		}
		jobs = append(jobs, fam.Jobs[k])
	}
	done, err := lake.Succeeded(ctx, l, jobs, ids)
	if err != nil {
		return err
	}
	if len(done) == 0 {
		return nil
	}
	by := map[string]int{}
	for _, j := range done {
		by[j]++
	}
	var where []string
	for j, n := range by {
		where = append(where, fmt.Sprintf("%d in job %s", n, j))
	}
	sort.Strings(where)
	return &errkind.UsageError{Msg: fmt.Sprintf("job %s would send %d of its %d records again that have already succeeded (%s): it is a stale retry child; nothing was submitted. Run `batchlake retry --job %s` again for a child of the records still to do",
		m.JobKey, len(done), len(ids), strings.Join(where, ", "), m.ParentJobKey)}
}
