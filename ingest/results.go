package ingest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/lake/failpoint"
)

// Channels a result file arrives on.
const (
	ChannelOutput = "output"
	ChannelError  = "error"
)

// FileResult says what ingesting one file did.
type FileResult struct {
	Channel     string `json:"channel"`
	File        string `json:"file"`
	RawSHA256   string `json:"raw_sha256"`
	Lines       int64  `json:"lines"`
	Rows        int64  `json:"rows"`
	Quarantined int64  `json:"quarantined"`
	Created     bool   `json:"created"`
}

// FileOptions describe one result file to ingest.
type FileOptions struct {
	Path          string
	Channel       string
	ProviderJobID string
	TmpDir        string
	// Owned says Path is a temporary file of the caller's, made with
	// lake.CreateTemp, that is only read and removed after the ingest (a
	// download of collect): a local lake takes the file itself as the raw
	// archive (lake.PutTempFile) instead of a copy. Anyone else's file is
	// always copied: the lake must not share it.
	Owned bool
	Now   func() time.Time
	// Mode is how the file's lines were sent: "" or "batch" for a provider
	// batch, "sync" for the real-time API (the sync tail), which reconcile
	// prices without the batch multiplier.
	Mode string
	// Progress, if set, is told the bytes of the file parsed so far.
	Progress Progress
	// Raw, if set, is the file's sha256 and RawSize its size, hashed by the
	// caller already (ingest hashes a file while it checks its ids). A file
	// whose size is no longer RawSize is hashed again.
	Raw     *lake.Digest
	RawSize int64
}

// IngestFile archives a provider output or error file raw and
// content-addressed, normalises its lines into attempt rows (quarantining
// lines it cannot read) and commits an ingest record. Ingesting the same bytes
// again changes nothing.
func IngestFile(ctx context.Context, l *lake.Lake, m *lake.Manifest, o FileOptions) (FileResult, error) {
	name := filepath.Base(o.Path)
	res := FileResult{Channel: o.Channel, File: name}
	if o.Channel != ChannelOutput && o.Channel != ChannelError {
		return res, fmt.Errorf("ingest %s: unknown channel %q", name, o.Channel)
	}
	f, err := FormatFor(m.Provider)
	if err != nil {
		return res, err
	}
	job, err := lake.ParseDigest(m.JobKey)
	if err != nil {
		return res, err
	}
	var (
		raw  lake.Digest
		size int64
	)
	if st, err := os.Stat(o.Path); o.Raw != nil && err == nil && st.Size() == o.RawSize {
		raw, size = *o.Raw, o.RawSize
	} else if raw, size, err = lake.HashFile(o.Path); err != nil {
		return res, &errkind.UsageError{Msg: fmt.Sprintf("ingest: %v", err)}
	}
	res.RawSHA256 = raw.Hex()
	markerKey := lake.IngestKey(job, o.Channel, raw)
	var rec lake.IngestRecord
	if err := l.GetJSON(ctx, markerKey, lake.FormatIngest, &rec); err == nil {
		res.Lines, res.Rows, res.Quarantined = rec.Lines, rec.Rows, rec.Quarantined
		return res, nil
	} else if !errors.Is(err, lake.ErrNotFound) {
		return res, err
	}
	// The raw file is archived while its lines are parsed; nothing is
	// committed before the archive is complete (everything is derived from it).
	archived := make(chan error, 1)
	put := l.PutFileAs
	if o.Owned {
		put = l.PutTempFile
	}
	go func() { archived <- put(ctx, o.Path, lake.ObjectKey(raw), raw, size) }()
	archiveErr := func() error {
		if archived == nil {
			return nil
		}
		err := <-archived
		archived = nil
		return err
	}
	defer archiveErr()
	// A job whose expected table is split by partition gets its attempts
	// split the same way (a line goes with the record of its custom_id).
	var aw *lake.TableWriter[lake.AttemptRow]
	if m.ExpectedSplit > 1 {
		aw = lake.NewSplitTableWriter(l, o.TmpDir, "attempts", m.Tenant, job, m.ExpectedSplit,
			func(r *lake.AttemptRow) string { return r.CustomID })
	} else if aw, err = lake.NewTableWriter[lake.AttemptRow](l, o.TmpDir, "attempts", m.Tenant, job); err != nil {
		return res, err
	}
	defer aw.Abort()
	qw, err := lake.NewTableWriter[lake.QuarantineRow](l, o.TmpDir, "quarantine", m.Tenant, job)
	if err != nil {
		return res, err
	}
	defer qw.Abort()
	file, err := os.Open(o.Path)
	if err != nil {
		return res, err
	}
	defer file.Close()
	type parsed struct {
		row lake.AttemptRow
		raw []byte // kept only for quarantined lines
		err error
	}
	rows := make([]lake.AttemptRow, 0, 1024)
	err = ParallelLines(ctx, withProgress(bufio.NewReaderSize(file, 1<<20), o.Progress), func(ln Line) parsed {
		row, err := f.ParseResult(ln.Bytes, o.Channel)
		if err != nil {
			return parsed{err: err, raw: append([]byte(nil), ln.Bytes...)}
		}
		return parsed{row: row}
	}, func(ln Line, p parsed) error {
		res.Lines++
		if p.err != nil {
			res.Quarantined++
			return qw.Write(lake.QuarantineRow{JobKey: m.JobKey, Tenant: m.Tenant, Channel: o.Channel, RawSHA256: res.RawSHA256, LineNo: ln.No, Reason: p.err.Error(), Raw: p.raw})
		}
		r := p.row
		r.JobKey, r.Tenant, r.Provider, r.ProviderJobID = m.JobKey, m.Tenant, m.Provider, o.ProviderJobID
		r.Channel, r.RawSHA256, r.LineNo = o.Channel, res.RawSHA256, ln.No
		if r.ModelVersion == "" {
			r.ModelVersion = m.Model
		}
		rows = append(rows, r)
		res.Rows++
		if len(rows) == cap(rows) {
			if err := aw.Write(rows...); err != nil {
				return err
			}
			rows = rows[:0]
		}
		return nil
	})
	if aerr := archiveErr(); aerr != nil {
		return res, aerr
	}
	failpoint.Hit(failpoint.IngestAfterRaw)
	if err != nil {
		if errors.Is(err, ErrLineTooLong) {
			return res, &errkind.InputError{File: name, Msg: err.Error()}
		}
		return res, fmt.Errorf("ingest %s: %w", name, err)
	}
	if err := aw.Write(rows...); err != nil {
		return res, err
	}
	rec = lake.IngestRecord{Version: lake.IngestVersion}
	if m.ExpectedSplit > 1 {
		rec.Version, rec.AttemptsSplit = lake.IngestSplitVersion, m.ExpectedSplit
		rec.AttemptsFiles, rec.AttemptsBuckets, err = aw.CommitSplit(ctx)
	} else {
		rec.AttemptsFile, err = aw.Commit(ctx)
	}
	if err != nil {
		return res, err
	}
	failpoint.Hit(failpoint.IngestAfterAttempts)
	qkey, err := qw.Commit(ctx)
	if err != nil {
		return res, err
	}
	now := time.Now().UTC()
	if o.Now != nil {
		now = o.Now()
	}
	rec.JobKey, rec.Provider, rec.Channel, rec.Raw, rec.RawBytes = m.JobKey, m.Provider, o.Channel, raw, size
	rec.FileName, rec.ProviderJobID, rec.Lines, rec.Rows, rec.Quarantined = name, o.ProviderJobID, res.Lines, res.Rows, res.Quarantined
	rec.QuarantineFile, rec.IngestedAt, rec.Mode = qkey, now, o.Mode
	// The commit marker last: until it exists the files above are invisible.
	created, err := l.PutJSON(ctx, markerKey, lake.FormatIngest, rec)
	if err != nil {
		if errors.Is(err, lake.ErrCorrupt) {
			// A concurrent ingest of the same file committed first (its marker
			// differs only in time): that is success.
			return res, nil
		}
		return res, err
	}
	failpoint.Hit(failpoint.IngestAfterMarker)
	res.Created = created
	return res, nil
}
