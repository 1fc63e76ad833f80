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
// is succeeded in the newest reconcile of a retry descendant of the parent
// (a sibling child, or its children, that already did them), each with the
// job that says so. The parent's own report made the retry set: none of its
// records there succeeded.
func succeededInFamily(ctx context.Context, l *lake.Lake, fam *lake.Family, parent string, lineage map[string]ingest.Lineage) (map[string]string, error) {
	var jobs []*lake.Manifest
	for _, k := range fam.Descendants(parent, "") {
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
		sent, done := false, false
		for _, s := range old.Shards {
			last, err := g.Last(ctx, job, s.ShardID)
			if err != nil {
				return nil, nil, err
			}
			if last.Detail[lake.DetailSupersededBy] != "" {
				done = true
			} else if last.State != lake.Validated {
				sent = true
			}
		}
		if done && !sent {
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
