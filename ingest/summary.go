package ingest

import (
	"context"
	"errors"
	"time"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

// ChannelSummary is the ingest channel of a provider's job summary (Bedrock
// manifest.json.out): no result lines, only the provider's totals, archived
// raw so that reconcile can cross-check them against the lines.
const ChannelSummary = "summary"

// RecordSummary archives a provider job summary content-addressed and
// commits an ingest record for it (channel summary). Recording the same
// bytes again writes nothing.
func RecordSummary(ctx context.Context, l *lake.Lake, m *lake.Manifest, name, providerJobID string, data []byte, now time.Time) error {
	if _, err := ParseBedrockManifest(data); err != nil {
		return &errkind.InputError{File: name, Msg: err.Error()}
	}
	raw, err := l.PutObject(ctx, data)
	if err != nil {
		return err
	}
	job, err := lake.ParseDigest(m.JobKey)
	if err != nil {
		return err
	}
	key := lake.IngestKey(job, ChannelSummary, raw)
	if ok, err := l.Exists(ctx, key); err != nil || ok {
		return err
	}
	rec := lake.IngestRecord{Version: lake.IngestVersion, JobKey: m.JobKey, Provider: m.Provider, Channel: ChannelSummary,
		Raw: raw, RawBytes: int64(len(data)), FileName: name, ProviderJobID: providerJobID, IngestedAt: now.UTC()}
	if _, err := l.PutJSON(ctx, key, lake.FormatIngest, rec); err != nil && !errors.Is(err, lake.ErrCorrupt) {
		// ErrCorrupt: a concurrent ingest of the same summary committed first.
		return err
	}
	return nil
}
