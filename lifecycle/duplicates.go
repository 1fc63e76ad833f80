package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/providers"
)

// DuplicateBatch is a paid batch made for a shard beside the one the shard
// is bound to: status cancels it, collect ingests whatever results it has
// (reconcile prices a record's second success as duplicate_submission).
type DuplicateBatch struct {
	ProviderJobID  string `json:"provider_job_id"`
	ProviderStatus string `json:"provider_status,omitempty"`
	// Why is how it was found: created_after_lease_lost (a submitter's
	// create went out, then it lost the shard) or found_duplicate (a lookup
	// found more than one batch for the shard).
	Why    string `json:"why"`
	Action string `json:"action,omitempty"`
}

// duplicates returns the shard's recorded batches other than the bound one.
// Before the shard is bound nothing can be told apart: none.
func (d *Driver) duplicates(ctx context.Context, job lake.Digest, shard, bound string) ([]DuplicateBatch, error) {
	if bound == "" {
		return nil, nil
	}
	recs, err := d.Ledger.BatchRecords(ctx, job, shard)
	if err != nil {
		return nil, err
	}
	var out []DuplicateBatch
	for _, r := range recs {
		if r.ProviderJobID != bound {
			out = append(out, DuplicateBatch{ProviderJobID: r.ProviderJobID, Why: r.Why})
		}
	}
	return out, nil
}

// cancelling reports whether a provider status word means a cancel is
// already under way.
func cancelling(status string) bool {
	s := strings.ToLower(status)
	return strings.HasPrefix(s, "cancel") || s == "stopping"
}

// pollDuplicates polls a bound shard's duplicate batches, asking the
// provider to cancel those still running. It reports whether any is not
// terminal yet.
func (d *Driver) pollDuplicates(ctx context.Context, job lake.Digest, sr *ShardResult) (pending bool, err error) {
	dups, err := d.duplicates(ctx, job, sr.ShardID, sr.ProviderJobID)
	if err != nil || len(dups) == 0 {
		return false, err
	}
	var errs []error
	for i := range dups {
		dup := &dups[i]
		b, err := d.Client.Get(ctx, dup.ProviderJobID)
		if err != nil {
			errs = append(errs, fmt.Errorf("duplicate batch %s: %w", dup.ProviderJobID, err))
			continue
		}
		dup.ProviderStatus, dup.Action = b.Status, "unchanged"
		if b.Terminal() {
			continue
		}
		pending = true
		if cancelling(b.Status) {
			continue
		}
		if cb, err := d.Client.Cancel(ctx, dup.ProviderJobID); err != nil {
			errs = append(errs, fmt.Errorf("cancel duplicate batch %s: %w", dup.ProviderJobID, err))
		} else {
			dup.ProviderStatus, dup.Action = cb.Status, "cancel_requested"
		}
	}
	sr.Duplicates = dups
	sr.Detail += fmt.Sprintf("%d duplicate batch(es) of this shard (paid twice): cancelled and collected as duplicate submissions. ", len(dups))
	return pending, errors.Join(errs...)
}

// collectDuplicates ingests the results of a bound shard's terminal
// duplicate batches (files already ingested are skipped). It reports
// whether any duplicate is not terminal yet.
func (d *Driver) collectDuplicates(ctx context.Context, m *lake.Manifest, s lake.ManifestShard, job lake.Digest, bound string, have map[string]bool, sr *ShardResult) (pending bool, err error) {
	dups, err := d.duplicates(ctx, job, s.ShardID, bound)
	if err != nil || len(dups) == 0 {
		return false, err
	}
	for i := range dups {
		dup := &dups[i]
		b, err := d.Client.Get(ctx, dup.ProviderJobID)
		if err != nil {
			return false, fmt.Errorf("duplicate batch %s: %w", dup.ProviderJobID, err)
		}
		dup.ProviderStatus = b.Status
		if !b.Terminal() {
			dup.Action, pending = "not_ready", true
			continue
		}
		dup.Action = "already_collected"
		for _, f := range []struct{ id, channel string }{{b.OutputFileID, ingest.ChannelOutput}, {b.ErrorFileID, ingest.ChannelError}} {
			if f.id == "" || have[dup.ProviderJobID+"/"+f.channel] {
				continue
			}
			_, _, err := d.collectFile(ctx, m, s, dup.ProviderJobID, f.id, f.channel)
			if errors.Is(err, providers.ErrFileGone) {
				continue
			}
			if err != nil {
				return false, fmt.Errorf("collect duplicate batch %s: %w", dup.ProviderJobID, err)
			}
			dup.Action = "collected"
		}
	}
	sr.Duplicates = dups
	return pending, nil
}
