package lake

import (
	"context"
	"fmt"
	"time"
)

// FormatRetraction is the envelope format of a retraction marker.
const FormatRetraction = "batchlake.retraction/v1"

// RetractionVersion is the version of the retraction body this code writes and reads.
const RetractionVersion = 1

// Retraction records that an ingested raw file no longer counts for a job
// (ingest --retract): reconcile leaves out every line of it, on every channel
// it was ingested on. Nothing is deleted: the raw file, its ingest records and
// its attempt rows stay in the lake (and in the attempts view). It is written
// once under RetractionKey, after the ingest records it names, and is final.
type Retraction struct {
	Version int    `json:"retraction_version"`
	JobKey  string `json:"job_key"`
	Raw     Digest `json:"raw_sha256"`
	// Ingests are the keys of the ingest records it retracts (one a channel).
	Ingests     []string  `json:"ingests"`
	FileName    string    `json:"file_name,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	RetractedAt time.Time `json:"retracted_at"`
}

// Retractions returns the retraction markers of a job, by raw file.
func (l *Lake) Retractions(ctx context.Context, job Digest) (map[Digest]Retraction, error) {
	keys, err := l.List(ctx, RetractionPrefix(job))
	if err != nil {
		return nil, err
	}
	out := map[Digest]Retraction{}
	for _, k := range keys {
		kjob, raw, ok := ParseRetractionKey(k)
		if !ok || kjob != job {
			continue // a concurrent write's temp file (fileblob)
		}
		var r Retraction
		if err := l.GetJSON(ctx, k, FormatRetraction, &r); err != nil {
			return nil, err
		}
		if r.Version != RetractionVersion {
			return nil, errUnknownVersion(k, r.Version)
		}
		if r.Raw != raw || r.JobKey != job.Hex() {
			return nil, fmt.Errorf("lake read %s: body retracts %s from job %q: %w", k, r.Raw, r.JobKey, ErrCorrupt)
		}
		out[raw] = r
	}
	return out, nil
}
