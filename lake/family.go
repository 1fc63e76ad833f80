package lake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/parquet-go/parquet-go"
	"golang.org/x/sync/errgroup"
)

// Detail keys of the ledger event that supersedes an unsubmitted retry
// child: a newer retry of the same parent moves each of its VALIDATED shards
// to CANCELLED with these.
const (
	DetailSupersededBy = "superseded_by"
	DetailReason       = "reason"
)

// LatestReportKey is the key of the report a job's ledger last closed with:
// the "report" detail of the newest event of any of its shards.
func LatestReportKey(ctx context.Context, l *Lake, m *Manifest) (string, error) {
	job, err := ParseDigest(m.JobKey)
	if err != nil {
		return "", err
	}
	all, err := NewLedger(l, "").EventsOf(ctx, job, m.ShardIDs())
	if err != nil {
		return "", err
	}
	var key string
	var at time.Time
	for _, evs := range all {
		for _, ev := range evs {
			if k := ev.Detail["report"]; k != "" && !ev.At.Before(at) {
				key, at = k, ev.At
			}
		}
	}
	if key == "" {
		return "", fmt.Errorf("job %s has not been reconciled: %w", m.JobKey, ErrNotReconciled)
	}
	return key, nil
}

// Family reads every manifest of the lake and indexes the retry tree:
// manifests by job key, and each job's children. The manifests are shared
// with the lake's cache (manifestCache): read them, do not change them.
type Family struct {
	Jobs     map[string]*Manifest
	Children map[string][]string
}

// ReadFamily reads every manifest in the lake (a retry or submit of a child
// job asks which other children its parent has). A manifest is written once
// and never changes, so one this Lake has read (and checked) before is taken
// from its cache: in a process that makes many jobs (a generator, a
// scheduler's worker) each call reads only the manifests new since the last,
// and lists the manifests by name.
func ReadFamily(ctx context.Context, l *Lake) (*Family, error) {
	ds, err := l.JobKeys(ctx)
	if err != nil {
		return nil, err
	}
	// Several at a time: on an object store each manifest is a round trip.
	ms := make([]*Manifest, len(ds))
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(familyReaders)
	for i, d := range ds {
		if m, ok := l.manifests.get(d); ok {
			ms[i] = m
			continue
		}
		eg.Go(func() error {
			m, err := l.GetManifest(ectx, d)
			if err != nil {
				return err
			}
			l.manifests.put(d, m)
			ms[i] = m
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	f := &Family{Jobs: map[string]*Manifest{}, Children: map[string][]string{}}
	for _, m := range ms {
		f.Jobs[m.JobKey] = m
		if m.ParentJobKey != "" {
			f.Children[m.ParentJobKey] = append(f.Children[m.ParentJobKey], m.JobKey)
		}
	}
	return f, nil
}

// familyReaders is how many manifests ReadFamily reads at once.
const familyReaders = 8

// manifestCache holds the manifests ReadFamily has read, by job key; the
// zero value is empty and ready.
type manifestCache struct {
	mu sync.Mutex
	m  map[Digest]*Manifest
}

func (c *manifestCache) get(d Digest) (*Manifest, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.m[d]
	return m, ok
}

func (c *manifestCache) put(d Digest, m *Manifest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[Digest]*Manifest{}
	}
	c.m[d] = m
}

// Root is the first attempt whose retry tree job is in.
func (f *Family) Root(job string) string {
	for range len(f.Jobs) {
		m := f.Jobs[job]
		if m == nil || m.ParentJobKey == "" || f.Jobs[m.ParentJobKey] == nil {
			break
		}
		job = m.ParentJobKey
	}
	return job
}

// Tree lists the jobs of job's retry tree (its root and every descendant of
// the root) but job itself.
func (f *Family) Tree(job string) []string {
	root := f.Root(job)
	var out []string
	if root != job {
		out = append(out, root)
	}
	for _, k := range f.Descendants(root, "") {
		if k != job {
			out = append(out, k)
		}
	}
	return out
}

// IsDescendant reports whether job descends from ancestor.
func (f *Family) IsDescendant(job, ancestor string) bool {
	for range len(f.Jobs) {
		m := f.Jobs[job]
		if m == nil || m.ParentJobKey == "" {
			return false
		}
		if m.ParentJobKey == ancestor {
			return true
		}
		job = m.ParentJobKey
	}
	return false
}

// Descendants lists job's retry descendants (children, their children, …),
// leaving out skip and everything under it.
func (f *Family) Descendants(job, skip string) []string {
	var out []string
	seen := map[string]bool{job: true, skip: true}
	for queue := f.Children[job]; len(queue) > 0; queue = queue[1:] {
		c := queue[0]
		if seen[c] {
			continue
		}
		seen[c] = true
		out = append(out, c)
		queue = append(queue, f.Children[c]...)
	}
	return out
}

// Succeeded returns, of the record ids in among, those whose outcome is
// succeeded in the newest reconcile of any of jobs, each with the job that
// says so. Jobs not reconciled yet are skipped.
func Succeeded(ctx context.Context, l *Lake, jobs []*Manifest, among map[string]bool) (map[string]string, error) {
	out := map[string]string{}
	for _, m := range jobs {
		key, err := LatestReportKey(ctx, l, m)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var rep struct {
			OutcomesFile string `json:"outcomes_file"`
		}
		if err := l.GetJSON(ctx, key, FormatReport, &rep); err != nil {
			return nil, err
		}
		if rep.OutcomesFile == "" {
			continue
		}
		err = ReadTableFile(ctx, l, rep.OutcomesFile, func(rows []outcomeState) error {
			for _, r := range rows {
				if r.Outcome == "succeeded" && among[r.RecordID] {
					if _, ok := out[r.RecordID]; !ok {
						out[r.RecordID] = m.JobKey
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("outcomes of job %s: %w", m.JobKey, err)
		}
	}
	return out, nil
}

// Unreconciled names the result files of job m whose counting changed since
// its latest reconcile: ingested after it (added), or retracted after it
// (gone), as "channel file (sha256 …)". A retry shard made from that
// reconcile would send records the added files answered, paid twice, or
// leave out records whose only answer was retracted. ErrNotReconciled if
// the job has no reconcile.
func Unreconciled(ctx context.Context, l *Lake, m *Manifest) (added, gone []string, err error) {
	key, err := LatestReportKey(ctx, l, m)
	if err != nil {
		return nil, nil, err
	}
	var rep struct {
		Files struct {
			Output, Error []string
		} `json:"files"`
	}
	if err := l.GetJSON(ctx, key, FormatReport, &rep); err != nil {
		return nil, nil, err
	}
	job, err := ParseDigest(m.JobKey)
	if err != nil {
		return nil, nil, err
	}
	recs, err := l.IngestRecords(ctx, job)
	if err != nil {
		return nil, nil, err
	}
	retracted, err := l.Retractions(ctx, job)
	if err != nil {
		return nil, nil, err
	}
	counted := map[string]bool{}
	for _, h := range rep.Files.Output {
		counted["output "+h] = true
	}
	for _, h := range rep.Files.Error {
		counted["error "+h] = true
	}
	now := map[string]bool{}
	for _, r := range recs {
		if _, out := retracted[r.Raw]; out || (r.Channel != "output" && r.Channel != "error") {
			continue // retracted, or a provider's summary: no result lines
		}
		k := r.Channel + " " + r.Raw.Hex()
		now[k] = true
		if !counted[k] {
			added = append(added, fmt.Sprintf("%s %s (sha256 %s)", r.Channel, r.FileName, r.Raw.Hex()))
		}
	}
	for k := range counted {
		if !now[k] {
			channel, h, _ := strings.Cut(k, " ")
			gone = append(gone, fmt.Sprintf("%s file (sha256 %s)", channel, h))
		}
	}
	sort.Strings(added)
	sort.Strings(gone)
	return added, gone, nil
}

// UnreconciledText says what Unreconciled found, for a message.
func UnreconciledText(added, gone []string) string {
	var parts []string
	if len(added) > 0 {
		parts = append(parts, "ingested since: "+strings.Join(added, ", "))
	}
	if len(gone) > 0 {
		parts = append(parts, "retracted since: "+strings.Join(gone, ", "))
	}
	return strings.Join(parts, "; ")
}

// RecordIDs returns the record ids of a job's expected rows.
func RecordIDs(ctx context.Context, l *Lake, m *Manifest) (map[string]bool, error) {
	ids := make(map[string]bool, m.ExpectedRecords)
	for _, k := range m.ExpectedFiles {
		if err := ReadTableFile(ctx, l, k, func(rows []ExpectedRow) error {
			for _, r := range rows {
				ids[r.RecordID] = true
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("expected rows of job %s: %w", m.JobKey, err)
		}
	}
	return ids, nil
}

// outcomeState is the part of an outcome row Succeeded reads: reading only
// these columns, it reads outcomes files of every table format alike
// (cost_usd changed type between formats 1 and 2).
type outcomeState struct {
	RecordID string `parquet:"record_id"`
	Outcome  string `parquet:"outcome"`
}

// ReadTableFile reads a table file (verified against the digest in its
// name) and passes its rows to fn a batch at a time.
func ReadTableFile[T any](ctx context.Context, l *Lake, key string, fn func([]T) error) error {
	d, ok := ParseObjectKey(key)
	if !ok {
		return fmt.Errorf("table file %s: no digest in its name", key)
	}
	b, err := l.GetVerified(ctx, key, d)
	if err != nil {
		return err
	}
	r := parquet.NewGenericReader[T](bytes.NewReader(b))
	defer r.Close()
	buf := make([]T, 4096)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if ferr := fn(buf[:n]); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("table file %s: %w", key, err)
		}
	}
}
