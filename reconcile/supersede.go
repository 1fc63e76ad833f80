package reconcile

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// A retry never puts a record whose latest state is succeeded in a child,
// and a newer retry of a parent supersedes its older children that were not
// submitted yet, so that only the newest child can be sent.

// succeededInFamily returns, of the records in lineage, those whose outcome
// is succeeded in the newest reconcile of another job of the parent's retry
// tree (a child, or its children, that already did them; an ancestor that
// late results answered), each with the job that says so. The parent's own
// report made the retry set: none of its records there succeeded.
func succeededInFamily(ctx context.Context, l *lake.Lake, fam *lake.Family, parent string, lineage map[string]ingest.Lineage) (map[string]string, error) {
	// Anywhere in the tree: a descendant's answers, or answers ingested
	// late into an ancestor after this job was made.
	var jobs []*lake.Manifest
	for _, k := range fam.Tree(parent) {
		jobs = append(jobs, fam.Jobs[k])
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	ids := make(map[string]bool, len(lineage))
	for _, li := range lineage {
		ids[li.RecordID] = true
	}
	return lake.Succeeded(ctx, l, jobs, ids)
}

// sentInFamily returns, of the parent's retry records (lineage) that no
// descendant succeeded on (done), those a descendant was sent with (a batch
// submitted, a real-time call made), each with that job: their outcome is
// that job's to settle, by its own reconcile and retry, and a retry of the
// parent would send them again (paid twice while in flight, or past the
// caps of a record the descendant gave up on).
func sentInFamily(ctx context.Context, l *lake.Lake, fam *lake.Family, parent string, lineage map[string]ingest.Lineage, done map[string]string) (map[string]string, error) {
	ids := make(map[string]bool, len(lineage))
	for _, li := range lineage {
		if _, ok := done[li.RecordID]; !ok {
			ids[li.RecordID] = true
		}
	}
	out := map[string]string{}
	g := lake.NewLedger(l, "")
	for _, k := range fam.Descendants(parent, "") {
		m := fam.Jobs[k]
		if len(ids) == 0 {
			break
		}
		if m == nil {
			continue
		}
		sent, err := wasSent(ctx, g, m)
		if err != nil {
			return nil, err
		}
		if !sent {
			continue
		}
		held, err := lake.RecordIDs(ctx, l, m)
		if err != nil {
			return nil, err
		}
		for id := range held {
			if ids[id] {
				out[id] = k
				delete(ids, id)
			}
		}
	}
	return out, nil
}

// sendState reads the last event of each shard of job m: sent, whether a
// shard left VALIDATED other than by a newer retry superseding it (its
// records were sent, or are being sent); by, the job a supersede event
// names, if any.
func sendState(ctx context.Context, g *lake.Ledger, m *lake.Manifest) (sent bool, by string, err error) {
	job, err := lake.ParseDigest(m.JobKey)
	if err != nil {
		return false, "", err
	}
	for _, s := range m.Shards {
		last, err := g.Last(ctx, job, s.ShardID)
		if err != nil {
			return false, "", err
		}
		if b := last.Detail[lake.DetailSupersededBy]; b != "" {
			by = b
		} else if last.State != lake.Validated {
			sent = true
		}
	}
	return sent, by, nil
}

// wasSent is sendState's sent.
func wasSent(ctx context.Context, g *lake.Ledger, m *lake.Manifest) (bool, error) {
	sent, _, err := sendState(ctx, g, m)
	return sent, err
}

// SentChild returns the newest child of job that was sent (wasSent), or "":
// run, started again on a job it ran before, follows it instead of making
// another child of the same records.
func SentChild(ctx context.Context, l *lake.Lake, job string) (string, error) {
	fam, err := lake.ReadFamily(ctx, l)
	if err != nil {
		return "", err
	}
	g := lake.NewLedger(l, "")
	var newest *lake.Manifest
	for _, k := range fam.Children[job] {
		m := fam.Jobs[k]
		if m == nil || (newest != nil && !m.CreatedAt.After(newest.CreatedAt)) {
			continue
		}
		if sent, err := wasSent(ctx, g, m); err != nil {
			return "", err
		} else if sent {
			newest = m
		}
	}
	if newest == nil {
		return "", nil
	}
	return newest.JobKey, nil
}

// writeWithout copies retry shard bytes to w, leaving out the lines whose
// record (by the line's custom id and the lineage) is in done.
func writeWithout(w io.Writer, shard []byte, f ingest.Format, lineage map[string]ingest.Lineage, done map[string]string) (kept int64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(shard))
	sc.Buffer(make([]byte, 0, 1<<20), ingest.MaxLineBytes)
	for n := 1; sc.Scan(); n++ {
		rec, ierr := f.ParseInput(sc.Bytes(), "")
		if ierr != nil {
			return kept, fmt.Errorf("retry shard line %d: %w", n, ierr)
		}
		if _, ok := done[lineage[rec.CustomID].RecordID]; ok {
			continue
		}
		if _, err := w.Write(sc.Bytes()); err != nil {
			return kept, err
		}
		if _, err := w.Write([]byte{'\n'}); err != nil {
			return kept, err
		}
		kept++
	}
	return kept, sc.Err()
}

// supersedeOlder marks the parent's children planned before child and not
// submitted yet (every shard VALIDATED) as superseded by it: each of their
// shards moves to CANCELLED with superseded_by, so submit refuses them and
// names the newer child. It returns the jobs superseded, and the older
// children left alone because they were already submitted.
func supersedeOlder(ctx context.Context, l *lake.Lake, fam *lake.Family, parent string, child *lake.Manifest) (superseded, submitted []string, err error) {
	g := lake.NewLedger(l, "")
	for _, k := range fam.Children[parent] {
		old := fam.Jobs[k]
		if k == child.JobKey || old == nil || !old.CreatedAt.Before(child.CreatedAt) {
			continue
		}
		job, err := lake.ParseDigest(k)
		if err != nil {
			return nil, nil, err
		}
		sent, by, err := sendState(ctx, g, old)
		if err != nil {
			return nil, nil, err
		}
		if by != "" && !sent {
			continue // superseded before (by this child or an earlier one)
		}
		if sent {
			submitted = append(submitted, k)
			continue
		}
		detail := map[string]string{lake.DetailSupersededBy: child.JobKey, lake.DetailReason: "superseded by a newer retry of " + parent}
		for _, s := range old.Shards {
			_, err := g.Transition(ctx, job, s.ShardID, lake.Cancelled, 0, "", detail)
			if errors.Is(err, lake.ErrIllegalTransition) || errors.Is(err, lake.ErrConflict) || errors.Is(err, lake.ErrLeased) {
				// A submitter took the shard a moment ago: that child is
				// being sent; the shards already marked keep it from more.
				sent = true
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("retry: supersede %s shard %s: %w", k, s.ShardID, err)
			}
		}
		if sent {
			submitted = append(submitted, k)
		} else {
			superseded = append(superseded, k)
		}
	}
	return superseded, submitted, nil
}
