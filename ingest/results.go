package ingest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

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
	// SplitMinBytes is the size of a result file's part in each of its
	// attempts files when the job's expected table is split (AttemptsSplit;
	// 0: DefaultSplitMinBytes; negative: every file split as the expected
	// table is).
	SplitMinBytes int64
	// RefuseOtherJobs refuses a file another job of the lake ingested and
	// did not retract (ingestedElsewhere): each result file is one batch's,
	// and counted in two jobs its lines, and their cost, would count twice.
	// For a file given by hand (the ingest command); collect downloads the
	// files of the batch the job's ledger binds.
	RefuseOtherJobs bool
	// Hash, if set, is the file's sha256 as the caller takes it (ingest
	// hashes a file while it checks its ids); otherwise IngestFile takes it.
	// Either way the lines are parsed meanwhile, and a file whose bytes
	// parsed are not the bytes hashed fails before anything is committed.
	Hash *Hashing
}

// DefaultSplitMinBytes is the default of FileOptions.SplitMinBytes.
const DefaultSplitMinBytes = 8 << 20

// SizedSplitMaxRecords bounds the jobs whose result files' attempts are split
// by size (AttemptsSplit): reconcile classifies a larger job in groups of its
// buckets (of about 1,250,000 records each by default), and a group reads
// whole only the attempts files split as the job's records are.
const SizedSplitMaxRecords = 2_500_000

// AttemptsSplit is how many files by partition the attempts of a result file
// of size bytes are split into in job m (0: one file of any rows). A job whose
// expected table is split gets them split the same way, a line going with the
// record of its custom_id; but every table file costs each reconcile statement
// that scans the attempts about half a millisecond, so in a job of up to
// SizedSplitMaxRecords records a file gets a split file per minBytes of its
// size (0: DefaultSplitMinBytes; negative: no bound), rounded down to a power
// of two: a provider batch of 50,000 answers (some 40 MB) four files, a file
// of a thousand errors one. A partition of n reads the split files its share
// of the ids falls in: about 1/n of a large file's attempts, all of a small
// one's.
func AttemptsSplit(m *lake.Manifest, size, minBytes int64) int {
	switch {
	case m.ExpectedSplit < 2:
		return 0
	case minBytes < 0 || m.ExpectedRecords > SizedSplitMaxRecords:
		return m.ExpectedSplit
	case minBytes == 0:
		minBytes = DefaultSplitMinBytes
	}
	n := 1
	for n*2 <= m.ExpectedSplit && int64(n*2)*minBytes <= size {
		n *= 2
	}
	if n < 2 {
		return 0
	}
	return n
}

// Hashing is a file's sha256 and size, taken on a goroutine of its own.
type Hashing struct {
	done chan struct{}
	d    lake.Digest
	n    int64
	err  error
}

// HashAsync starts hashing the file at path; ctx ends it early.
func HashAsync(ctx context.Context, path string) *Hashing {
	h := &Hashing{done: make(chan struct{})}
	go func() {
		defer close(h.done)
		h.d, h.n, h.err = lake.HashFileContext(ctx, path)
	}()
	return h
}

// Wait returns the file's digest and size once they are known.
func (h *Hashing) Wait() (lake.Digest, int64, error) {
	<-h.done
	return h.d, h.n, h.err
}

// ready says whether Wait would return at once.
func (h *Hashing) ready() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// errIngested stops the parse of a file found already ingested.
var errIngested = errors.New("already ingested")

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
	// The file is hashed while its lines are parsed: the digest names the
	// archive, the ingest record (so whether the file is ingested already)
	// and every row's raw_sha256, which the attempts table is given when it
	// is committed (lake.TableWriter.FillLater): the rows are written as they
	// are parsed, the hash running beside the parse however long it takes.
	// The few quarantined lines parsed before it is known are held.
	hctx, stopHash := context.WithCancel(ctx)
	defer stopHash()
	hashing := o.Hash
	if hashing == nil {
		hashing = HashAsync(hctx, o.Path)
	}
	var (
		raw       lake.Digest
		size      int64
		markerKey string
		rec       lake.IngestRecord
		known     bool // raw, size and markerKey are set
		// archivedBefore: the raw file was in the lake before this ingest
		// (with RefuseOtherJobs), so some other ingest may count it.
		archivedBefore bool
	)
	// The raw file is archived while its lines are parsed; nothing is
	// committed before the archive is complete (everything is derived from it).
	var archived chan error
	put := l.PutFileAs
	if o.Owned {
		put = l.PutTempFile
	}
	archiveErr := func() error {
		if archived == nil {
			return nil
		}
		err := <-archived
		archived = nil
		return err
	}
	defer archiveErr()
	file, err := os.Open(o.Path)
	if err != nil {
		return res, &errkind.UsageError{Msg: fmt.Sprintf("ingest: %v", err)}
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return res, &errkind.UsageError{Msg: fmt.Sprintf("ingest: %v", err)}
	}
	// The attempts are split by partition as the job's records are, a small
	// file's in fewer files (AttemptsSplit).
	split := AttemptsSplit(m, fi.Size(), o.SplitMinBytes)
	var aw *lake.TableWriter[lake.AttemptRow]
	if split > 1 {
		aw = lake.NewSplitTableWriter(l, o.TmpDir, "attempts", m.Tenant, job, split,
			func(r *lake.AttemptRow) string { return r.CustomID })
	} else if aw, err = lake.NewTableWriter[lake.AttemptRow](l, o.TmpDir, "attempts", m.Tenant, job); err != nil {
		return res, err
	}
	defer aw.Abort()
	if err := aw.FillLater("raw_sha256"); err != nil {
		return res, err
	}
	qw, err := lake.NewTableWriter[lake.QuarantineRow](l, o.TmpDir, "quarantine", m.Tenant, job)
	if err != nil {
		return res, err
	}
	defer qw.Abort()
	var (
		rows  = prefault(make([]lake.AttemptRow, 0, 1024))
		heldQ []lake.QuarantineRow
	)
	// hashed takes the digest (waiting for it), looks for the file's ingest
	// record, starts the archive and writes the quarantined lines held.
	hashed := func() error {
		var err error
		if raw, size, err = hashing.Wait(); err != nil {
			return &errkind.UsageError{Msg: fmt.Sprintf("ingest: %v", err)}
		}
		known, res.RawSHA256, markerKey = true, raw.Hex(), lake.IngestKey(job, o.Channel, raw)
		if err := l.GetJSON(ctx, markerKey, lake.FormatIngest, &rec); err == nil {
			return errIngested
		} else if !errors.Is(err, lake.ErrNotFound) {
			return err
		}
		if o.RefuseOtherJobs {
			// Asked before the archive below stores it.
			if archivedBefore, err = l.Exists(ctx, lake.ObjectKey(raw)); err != nil {
				return err
			}
		}
		archived = make(chan error, 1)
		go func() { archived <- put(ctx, o.Path, lake.ObjectKey(raw), raw, size) }()
		for i := range heldQ {
			heldQ[i].RawSHA256 = res.RawSHA256
		}
		if err := qw.Write(heldQ...); err != nil {
			return err
		}
		heldQ = nil
		return nil
	}
	type parsed struct {
		row lake.AttemptRow
		raw []byte // kept only for quarantined lines
		err error
	}
	// A line that names no model (Bedrock Converse, a Gemini line without
	// modelVersion) is the job's model's. Gemini's API names its models
	// models/…, as a plan's --model may; its lines and the price table
	// name them without.
	jobModel := m.Model
	if m.Provider == "gemini" {
		jobModel = strings.TrimPrefix(jobModel, "models/")
	}
	src := &progressReader{r: bufio.NewReaderSize(file, 1<<20), tell: o.Progress} // counts the bytes parsed
	err = ParallelLines(ctx, src, func(ln Line, p *parsed) {
		if p.row, p.err = f.ParseResult(ln.Bytes, o.Channel); p.err != nil {
			p.row, p.raw = lake.AttemptRow{}, append([]byte(nil), ln.Bytes...)
		}
	}, func(ln Line, p *parsed) error {
		res.Lines++
		if p.err != nil {
			res.Quarantined++
			q := lake.QuarantineRow{JobKey: m.JobKey, Tenant: m.Tenant, Channel: o.Channel, RawSHA256: res.RawSHA256, LineNo: ln.No, Reason: p.err.Error(), Raw: p.raw}
			if !known {
				heldQ = append(heldQ, q)
				return nil
			}
			return qw.Write(q)
		}
		rows = append(rows, p.row)
		r := &rows[len(rows)-1]
		r.JobKey, r.Tenant, r.Provider, r.ProviderJobID = m.JobKey, m.Tenant, m.Provider, o.ProviderJobID
		r.Channel, r.LineNo = o.Channel, ln.No // raw_sha256 at the commit
		if r.ModelVersion == "" {
			r.ModelVersion = jobModel
		}
		res.Rows++
		if len(rows) < cap(rows) {
			return nil
		}
		if err := aw.Write(rows...); err != nil {
			return err
		}
		rows = rows[:0]
		if !known && hashing.ready() {
			return hashed()
		}
		return nil
	})
	if err == nil && !known {
		err = hashed()
	}
	switch {
	case errors.Is(err, errIngested):
		return FileResult{Channel: o.Channel, File: name, RawSHA256: res.RawSHA256, Lines: rec.Lines, Rows: rec.Rows, Quarantined: rec.Quarantined}, nil
	case err == nil && src.n != size:
		return res, &errkind.UsageError{Msg: fmt.Sprintf("ingest %s: the file changed while it was ingested (%d bytes hashed, %d parsed); nothing was committed: ingest it again once it is complete", name, size, src.n)}
	case err == nil && archivedBefore && res.Lines > 0:
		// A file of no lines (an empty errors file) is every job's alike.
		if err := refuseIngestedElsewhere(ctx, l, job, raw, name, o.ProviderJobID); err != nil {
			return res, err
		}
	}
	// The attempts and quarantine tables are stored while the raw file's
	// archive may still be uploading (into a remote lake, side by side):
	// the marker, stored last, makes the three visible together.
	rec = lake.IngestRecord{Version: lake.IngestVersion}
	var (
		qkey    string
		commits *errgroup.Group
	)
	if err == nil {
		if err = aw.Write(rows...); err == nil {
			aw.Fill(job, res.RawSHA256)
			var cctx context.Context
			commits, cctx = errgroup.WithContext(ctx)
			commits.Go(func() (err error) {
				if split > 1 {
					rec.Version, rec.AttemptsSplit = lake.IngestSplitVersion, split
					rec.AttemptsFiles, rec.AttemptsBuckets, err = aw.CommitSplit(cctx)
				} else {
					rec.AttemptsFile, err = aw.Commit(cctx)
				}
				return err
			})
			commits.Go(func() (err error) {
				qkey, err = qw.Commit(cctx)
				return err
			})
		}
	}
	aerr := archiveErr()
	var cerr error
	if commits != nil {
		cerr = commits.Wait()
	}
	if aerr != nil {
		return res, aerr
	}
	failpoint.Hit(failpoint.IngestAfterRaw)
	if err != nil {
		var usage *errkind.UsageError
		switch {
		case errors.As(err, &usage):
			return res, err
		case errors.Is(err, ErrLineTooLong):
			return res, &errkind.InputError{File: name, Msg: err.Error()}
		}
		return res, fmt.Errorf("ingest %s: %w", name, err)
	}
	if cerr != nil {
		return res, cerr
	}
	failpoint.Hit(failpoint.IngestAfterAttempts)
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

// ingestedElsewhere lists the jobs other than job that ingested the file
// raw (on either channel) and did not retract it, but for those whose
// ingest names a provider batch other than providerJobID (when both name
// one): two batches' result files can be the same bytes (every line of both
// expired, at a provider whose error lines carry no request id). It lists
// the lake's ingest records, every job's: ask only for a file the lake holds
// already.
func ingestedElsewhere(ctx context.Context, l *lake.Lake, job, raw lake.Digest, providerJobID string) ([]lake.Digest, error) {
	keys, err := l.List(ctx, lake.IngestArea)
	if err != nil {
		return nil, err
	}
	suffix := "-" + raw.Hex() + ".json"
	var jobs []lake.Digest
	for _, k := range keys {
		if !strings.HasSuffix(k, suffix) {
			continue
		}
		dir, _, _ := strings.Cut(strings.TrimPrefix(k, lake.IngestArea), "/")
		other, err := lake.ParseDigest(dir)
		if err != nil || other == job || slices.Contains(jobs, other) ||
			(k != lake.IngestKey(other, ChannelOutput, raw) && k != lake.IngestKey(other, ChannelError, raw)) {
			continue
		}
		if providerJobID != "" {
			var rec lake.IngestRecord
			if err := l.GetJSON(ctx, k, lake.FormatIngest, &rec); err != nil {
				return nil, err
			}
			if rec.ProviderJobID != "" && rec.ProviderJobID != providerJobID {
				continue
			}
		}
		retracted, err := l.Retractions(ctx, other)
		if err != nil {
			return nil, err
		}
		if _, gone := retracted[raw]; !gone {
			jobs = append(jobs, other)
		}
	}
	return jobs, nil
}

// refuseIngestedElsewhere refuses the file raw (name) when another job
// counts it.
func refuseIngestedElsewhere(ctx context.Context, l *lake.Lake, job, raw lake.Digest, name, providerJobID string) error {
	others, err := ingestedElsewhere(ctx, l, job, raw, providerJobID)
	if err != nil || len(others) == 0 {
		return err
	}
	o := others[0].Hex()
	return &errkind.UsageError{Msg: fmt.Sprintf("ingest %s: this file (sha256 %s) was ingested into job %s before, and counts there: a result file is one batch's answers, and counted in two jobs its lines and their cost would count twice. "+
		"If it is this job's and not that one's, retract it there first (batchlake ingest --job %s --retract %s --reason \"wrong job\"), then ingest it here. Nothing was written; --force ingests it into this job anyway",
		name, raw.Hex(), o, o[:12], raw.Hex())}
}
