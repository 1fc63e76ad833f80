package lake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
)

// A compaction gathers the rows the lake-wide views read for many jobs into
// a few content-addressed Parquet objects per view source, so that a session
// over a lake of thousands of jobs reads a few dozen files instead of tens of
// thousands of markers and table files. It is a cache with a proof: written
// once, never trusted for a job whose markers changed since (JobMarkers), and
// checked against its sources by verify.
//
// Its rows are held in segments: each segment one object per view source,
// holding the rows of the jobs the marker places in it. Compacting again
// keeps the segments whose jobs are all unchanged as they are (their objects
// named again, not written), so the lake grows by the new rows rather than by
// a copy of every row each time.
//
//	compactions/<hex>.json   the marker: jobs covered, their marker fingerprints and segments, the objects
const (
	CompactionArea   = "compactions/"
	FormatCompaction = "batchlake.compaction/v1"
	// CompactionVersion is the marker version written: 2 holds segments;
	// markers of version 1 (one object per view source, in tables) are
	// still read, as one segment.
	CompactionVersion = 2
)

// Compaction is the marker of one compaction.
type Compaction struct {
	Version   int       `json:"compaction_version"`
	CreatedAt time.Time `json:"created_at"`
	// Jobs are the jobs covered, in job key order.
	Jobs []CompactedJob `json:"jobs"`
	// Segments (version 2) are the objects of the rows, oldest first; each
	// job's rows are in the segment its Segment names.
	Segments []CompactionSegment `json:"segments,omitempty"`
	// Tables (version 1 only) maps each view source to the objects/ key of
	// the one Parquet file of every job's rows.
	Tables map[string]string `json:"tables,omitempty"`
}

// CompactionSegment is one segment of a compaction: the rows of its jobs.
type CompactionSegment struct {
	// Tables maps each view source (expected, attempts, quarantine,
	// outcomes, costs, manifests, shards, ledger, report_files, ingests,
	// batches) to the objects/ key of its Parquet file.
	Tables map[string]string `json:"tables"`
}

// CompactedJob is one job a compaction covers: its rows in the compaction
// are those its markers gave when their keys digested to Markers.
type CompactedJob struct {
	JobKey  string `json:"job_key"`
	Tenant  string `json:"tenant"`
	Markers string `json:"markers"`
	// Segment is the index in Segments of the segment holding its rows
	// (always 0 in version 1).
	Segment int `json:"segment"`
}

// SegmentTables is each segment's view sources and objects, oldest first
// (a version 1 marker's tables are its one segment).
func (c *Compaction) SegmentTables() []map[string]string {
	if c.Version == 1 {
		return []map[string]string{c.Tables}
	}
	out := make([]map[string]string, len(c.Segments))
	for i, s := range c.Segments {
		out[i] = s.Tables
	}
	return out
}

// Objects is the objects/ keys of view source table, one per segment;
// false when a segment has no such table.
func (c *Compaction) Objects(table string) ([]string, bool) {
	var keys []string
	for _, ts := range c.SegmentTables() {
		k, ok := ts[table]
		if !ok {
			return nil, false
		}
		keys = append(keys, k)
	}
	return keys, true
}

// check is what a marker of a known version must satisfy besides its
// envelope: version 1 has tables and no segments; version 2 segments and
// no tables, every job in one of them and every segment holding a job.
func (c *Compaction) check() error {
	switch c.Version {
	case 1:
		if c.Tables == nil || len(c.Segments) > 0 {
			return fmt.Errorf("compaction_version 1 holds tables and no segments")
		}
		for _, j := range c.Jobs {
			if j.Segment != 0 {
				return fmt.Errorf("compaction_version 1: job %s in segment %d", j.JobKey, j.Segment)
			}
		}
	case 2:
		if c.Tables != nil {
			return fmt.Errorf("compaction_version 2 holds its tables in segments")
		}
		held := make([]int, len(c.Segments))
		for _, j := range c.Jobs {
			if j.Segment < 0 || j.Segment >= len(c.Segments) {
				return fmt.Errorf("job %s in segment %d of %d", j.JobKey, j.Segment, len(c.Segments))
			}
			held[j.Segment]++
		}
		for i, n := range held {
			if n == 0 {
				return fmt.Errorf("segment %d holds no job", i)
			}
		}
	default:
		return fmt.Errorf("unknown compaction_version %d", c.Version)
	}
	return nil
}

// CompactionKey is the key of a compaction marker named by digest d.
func CompactionKey(d Digest) string { return CompactionArea + d.Hex() + ".json" }

// ParseCompactionKey accepts exactly the keys CompactionKey builds.
func ParseCompactionKey(k string) (Digest, bool) {
	d, err := ParseDigest(strings.TrimSuffix(strings.TrimPrefix(k, CompactionArea), ".json"))
	if err != nil || CompactionKey(d) != k {
		return Digest{}, false
	}
	return d, true
}

// PutCompaction stores c under the digest of its body and returns the key.
func (l *Lake) PutCompaction(ctx context.Context, c *Compaction) (string, error) {
	if c.Version == 0 {
		c.Version = CompactionVersion
	}
	if err := c.check(); err != nil {
		return "", fmt.Errorf("lake put compaction: %w", err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	k := CompactionKey(Sum(b))
	if _, err := l.PutJSON(ctx, k, FormatCompaction, c); err != nil {
		return "", err
	}
	return k, nil
}

// LatestCompaction returns the newest compaction marker (by created_at,
// then key), or nil when the lake has none.
//
// Every compaction marker names every job it covers, and compacting again
// adds a marker, so reading them all would grow with both. The newest is
// found from each marker's first bytes (its created_at comes before its
// jobs), and only that one is read whole and checked: its envelope, its
// version, and that its created_at is the one its first bytes gave. A
// marker whose first bytes do not parse so is read whole.
func (l *Lake) LatestCompaction(ctx context.Context) (*Compaction, string, error) {
	keys, err := l.List(ctx, CompactionArea)
	if err != nil {
		return nil, "", err
	}
	var (
		bestAt  time.Time
		bestKey string
		best    *Compaction
	)
	for _, k := range keys {
		if _, ok := ParseCompactionKey(k); !ok {
			continue // a concurrent write's temp file
		}
		at, ok := l.compactionCreatedAt(ctx, k)
		var c *Compaction
		if !ok {
			if c, err = l.getCompaction(ctx, k); err != nil {
				return nil, "", err
			}
			at = c.CreatedAt
		}
		if bestKey == "" || at.After(bestAt) || (at.Equal(bestAt) && k > bestKey) {
			bestAt, bestKey, best = at, k, c
		}
	}
	if bestKey == "" {
		return nil, "", nil
	}
	if best == nil {
		if best, err = l.getCompaction(ctx, bestKey); err != nil {
			return nil, "", err
		}
		if !best.CreatedAt.Equal(bestAt) {
			return nil, "", fmt.Errorf("lake read %s: created_at %s, its first bytes say %s: %w", bestKey, best.CreatedAt, bestAt, ErrCorrupt)
		}
	}
	return best, bestKey, nil
}

func (l *Lake) getCompaction(ctx context.Context, k string) (*Compaction, error) {
	var c Compaction
	if err := l.GetJSON(ctx, k, FormatCompaction, &c); err != nil {
		return nil, err
	}
	if c.Version != 1 && c.Version != CompactionVersion {
		return nil, errUnknownVersion(k, c.Version)
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("lake read %s: %v: %w", k, err, ErrCorrupt)
	}
	return &c, nil
}

// compactionHead is how many bytes of a compaction marker hold its
// envelope's format and digest and its body's version and created_at.
const compactionHead = 512

// compactionCreatedAt reads a compaction marker's created_at from its first
// bytes ({"format":…,"sha256":…,"body":{"compaction_version":…,
// "created_at":…): false if they are not so. Nothing is trusted from it but
// the order: the marker chosen is read whole and checked.
func (l *Lake) compactionCreatedAt(ctx context.Context, k string) (time.Time, bool) {
	r, err := l.Bucket.NewRangeReader(ctx, k, 0, compactionHead, nil)
	if err != nil {
		return time.Time{}, false
	}
	head, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		return time.Time{}, false
	}
	dec := json.NewDecoder(bytes.NewReader(head))
	want := []any{json.Delim('{'), "format", FormatCompaction, "sha256", nil, "body", json.Delim('{'), "compaction_version", nil, "created_at"}
	for _, w := range want {
		tok, err := dec.Token()
		if err != nil || (w != nil && tok != w) {
			return time.Time{}, false
		}
	}
	tok, err := dec.Token()
	s, ok := tok.(string)
	if err != nil || !ok {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	return at, err == nil
}

// JobMarkers fingerprints, per job, every marker the views read a job's
// rows through besides its immutable manifest: its ingest records,
// retractions and ledger keys (reports are read only where a ledger event
// names them). Two equal fingerprints mean the same markers, hence the same
// rows: markers are write-once, and everything they reference is
// content-addressed. It lists each area once, flat (ListMarkerKeys).
func (l *Lake) JobMarkers(ctx context.Context) (map[string]string, error) {
	m, err := l.ListMarkerKeys(ctx)
	if err != nil {
		return nil, err
	}
	return m.Fingerprints(), nil
}

// checkCompactions checks each compaction marker: its envelope, its version,
// its name, and that every object it names exists and verifies. That its
// rows equal what its jobs' markers give is checked by reconcile, which can
// read them (reconcile.VerifyCompactions).
func (v *verifier) checkCompactions(ctx context.Context) error {
	for _, k := range v.compactionKeys {
		var c Compaction
		ok, err := v.readMarker(ctx, k, FormatCompaction, &c)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if err := c.check(); err != nil {
			v.problem(k, SeverityError, "%v", err)
			continue
		}
		for _, j := range c.Jobs {
			if d, err := ParseDigest(j.JobKey); err == nil {
				v.needManifest(k, d, "compaction")
			} else {
				v.problem(k, SeverityError, "compaction names job %q: %v", j.JobKey, err)
			}
		}
		for _, tables := range c.SegmentTables() {
			for name, key := range tables {
				if _, ok := ParseObjectKey(key); !ok || !strings.HasPrefix(key, "objects/") {
					v.problem(k, SeverityError, "compaction table %s is %q, not an object key", name, key)
					continue
				}
				v.checkRef(k, "compaction table "+name, key)
			}
		}
	}
	return nil
}

// listLocal is List of a local lake's folder prefix (ending in "/"): a plain
// walk of the folder. fileblob's listing stats every file and looks for its
// attributes file (three system calls a key), and walks the folder again
// from its start for each page of a thousand keys (a hundred thousand
// ledger events: a hundred walks). The walk opens a folder or two per job,
// so the folders under prefix are walked several at once (the system calls
// of one wait on another's); the keys come back in lexical order, as
// fileblob's.
func (l *Lake) listLocal(ctx context.Context, prefix string) ([]string, error) {
	root := filepath.Join(l.dir, filepath.FromSlash(prefix))
	top, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // an area not made yet
	}
	if err != nil {
		return nil, wrapOp("list", prefix, err)
	}
	base := strings.TrimSuffix(prefix, "/") + "/"
	per := make([][]string, len(top))
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(listWalkers)
	for i, e := range top {
		if !e.IsDir() {
			if !isAttrs(e.Name()) {
				per[i] = []string{base + e.Name()}
			}
			continue
		}
		eg.Go(func() error {
			return walkNames(ectx, filepath.Join(root, e.Name()), base+e.Name()+"/", &per[i])
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, wrapOp("list", prefix, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := 0
	for _, ks := range per {
		n += len(ks)
	}
	keys := make([]string, 0, n)
	for _, ks := range per {
		keys = append(keys, ks...)
	}
	return keys, nil
}

// walkNames appends the keys of the files under dir (key prefix base) in
// lexical order. It is filepath.WalkDir without the stat of each folder it
// starts from: a folder entry's type is known from its parent's listing.
func walkNames(ctx context.Context, dir, base string, keys *[]string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // a temp folder gone
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() {
			if err := walkNames(ctx, filepath.Join(dir, e.Name()), base+e.Name()+"/", keys); err != nil {
				return err
			}
			continue
		}
		if !isAttrs(e.Name()) {
			*keys = append(*keys, base+e.Name())
		}
	}
	return nil
}

// isAttrs says whether a local lake's file is the attributes file of
// another, which the lake does not write but fileblob would have (List
// leaves them out).
func isAttrs(name string) bool { return strings.HasSuffix(name, ".attrs") }

// listWalkers is how many folders listLocal walks at once.
const listWalkers = 8
