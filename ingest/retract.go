package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

// RetractResult is what ingest --retract prints.
type RetractResult struct {
	JobKey    string `json:"job_key"`
	RawSHA256 string `json:"raw_sha256"`
	FileName  string `json:"file_name"`
	// Channels are the channels the file was ingested on (all retracted).
	Channels []string `json:"channels"`
	Lines    int64    `json:"lines"`
	// Retraction is the marker's lake key.
	Retraction string `json:"retraction"`
	Created    bool   `json:"created"`
	Message    string `json:"message"`
}

// Retract records, write-once, that the raw file with digest raw no longer
// counts for job m: reconcile leaves its lines out from then on. The file,
// its ingest records and attempt rows stay in the lake. A digest that was
// never ingested into the job is a usage error; retracting twice changes
// nothing and says so. A retraction is final: ingesting the same file again
// does not bring it back.
func Retract(ctx context.Context, l *lake.Lake, m *lake.Manifest, raw, reason string, now time.Time) (*RetractResult, error) {
	d, err := lake.ParseDigest(raw)
	if err != nil {
		return nil, &errkind.UsageError{Msg: fmt.Sprintf("ingest --retract %s: want the sha256 of an ingested file (64 lower-case hex digits, as in the report's files or the attempts view's raw_sha256)", raw)}
	}
	job, err := lake.ParseDigest(m.JobKey)
	if err != nil {
		return nil, err
	}
	recs, err := l.IngestRecords(ctx, job)
	if err != nil {
		return nil, err
	}
	res := &RetractResult{JobKey: m.JobKey, RawSHA256: d.Hex(), Retraction: lake.RetractionKey(job, d), Channels: []string{}}
	rec := lake.Retraction{Version: lake.RetractionVersion, JobKey: m.JobKey, Raw: d, Reason: reason, RetractedAt: now.UTC()}
	for _, r := range recs {
		if r.Raw != d {
			continue
		}
		rec.Ingests = append(rec.Ingests, lake.IngestKey(job, r.Channel, r.Raw))
		res.Channels = append(res.Channels, r.Channel)
		res.Lines += r.Lines
		res.FileName = r.FileName
	}
	rec.FileName = res.FileName
	if len(rec.Ingests) == 0 {
		return nil, &errkind.UsageError{Msg: fmt.Sprintf("ingest --retract %s: no file with this sha256 was ingested into job %s (the report's files and the attempts view's raw_sha256 name the files that were)", d.Hex(), m.JobKey)}
	}
	var prior lake.Retraction
	if err := l.GetJSON(ctx, res.Retraction, lake.FormatRetraction, &prior); err == nil {
		res.Message = fmt.Sprintf("already retracted at %s: nothing new written", prior.RetractedAt.Format(time.RFC3339))
		return res, nil
	} else if !errors.Is(err, lake.ErrNotFound) {
		return nil, err
	}
	created, err := l.PutJSON(ctx, res.Retraction, lake.FormatRetraction, rec)
	if errors.Is(err, lake.ErrCorrupt) {
		// A concurrent retract of the same file committed first.
		res.Message = "already retracted: nothing new written"
		return res, nil
	}
	if err != nil {
		return nil, err
	}
	res.Created = created
	res.Message = fmt.Sprintf("retracted: reconcile leaves out its %d line(s); the file stays archived", res.Lines)
	return res, nil
}
