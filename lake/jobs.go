package lake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gocloud.dev/blob"
)

// ErrNoLake means the lake URL holds no lake: no job was ever planned there.
var ErrNoLake = errors.New("no lake")

// ErrJobNotFound means no job of the lake has the given key or key prefix.
var ErrJobNotFound = errors.New("job not found")

// ErrBadJobKey means a --job value is neither a job key nor a possible prefix of one.
var ErrBadJobKey = errors.New("bad job key")

// AmbiguousJobError is a job key prefix that more than one job starts with.
type AmbiguousJobError struct {
	Prefix     string
	Candidates []string // the matching job keys, in lexical order
}

func (e *AmbiguousJobError) Error() string {
	return fmt.Sprintf("job key prefix %s matches %d jobs: %s; give more digits", e.Prefix, len(e.Candidates), strings.Join(e.Candidates, ", "))
}

// JobNotFound is the one wording of a job that is not in the lake, for every
// command: it wraps ErrJobNotFound and names the lake without its query.
func JobNotFound(key, lakeURL string) error {
	return fmt.Errorf("%w: no job %s in lake %s (batchlake jobs lists the lake's jobs)", ErrJobNotFound, key, redactURL(lakeURL))
}

// minJobPrefix is the shortest job key prefix ResolveJob accepts: shorter
// ones match too much to be typed on purpose.
const minJobPrefix = 4

// OpenExisting opens the lake at u like Open, but only when a lake is there:
// a local folder is never created, and a lake holding no manifest is
// ErrNoLake. Commands that only read use it, so a mistyped --lake is reported
// instead of answered with an empty result.
func OpenExisting(ctx context.Context, u string) (*Lake, error) {
	if dir, ok := localDir(u); ok {
		fi, err := os.Stat(dir)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w at %s: the folder does not exist (plan or run creates a lake; check --lake or BATCHLAKE_LAKE)", ErrNoLake, u)
		}
		if err == nil && !fi.IsDir() {
			return nil, fmt.Errorf("%w at %s: it is a file, not a folder (check --lake or BATCHLAKE_LAKE)", ErrNoLake, u)
		}
	}
	l, err := Open(ctx, u)
	if err != nil {
		return nil, err
	}
	ok, err := l.HasJobs(ctx)
	if err == nil && !ok {
		err = fmt.Errorf("%w at %s: it holds no job (plan or run creates a lake; check --lake or BATCHLAKE_LAKE)", ErrNoLake, redactURL(u))
	}
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// localDir returns the folder of a local lake URL (a plain path or file://).
func localDir(u string) (string, bool) {
	if u == "" {
		u = "./lake"
	}
	switch {
	case strings.HasPrefix(u, "file://"):
		return filepath.FromSlash(strings.TrimPrefix(strings.SplitN(u, "?", 2)[0], "file://")), true
	case !strings.Contains(u, "://"):
		return u, true
	}
	return "", false
}

// HasJobs reports whether the lake holds at least one manifest, reading one
// listing page at most.
func (l *Lake) HasJobs(ctx context.Context) (bool, error) {
	found, err := retry(ctx, l, "list", ManifestPrefix, func(ctx context.Context) (bool, error) {
		it := l.Bucket.List(&blob.ListOptions{Prefix: ManifestPrefix})
		for {
			o, err := it.Next(ctx)
			if err == io.EOF {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			if !o.IsDir {
				return true, nil
			}
		}
	})
	if err != nil {
		return false, wrapOp("list", ManifestPrefix, err)
	}
	return found, nil
}

// JobKeys lists the keys of every job with a manifest, in lexical order
// (by name: a local lake's manifests are not each stat'ed).
func (l *Lake) JobKeys(ctx context.Context) ([]Digest, error) {
	keys, err := l.List(ctx, ManifestPrefix)
	if err != nil {
		return nil, err
	}
	jobs := make([]Digest, 0, len(keys))
	for _, k := range keys {
		name, ok := strings.CutSuffix(strings.TrimPrefix(k, ManifestPrefix), ".json")
		if !ok {
			continue
		}
		if d, err := ParseDigest(name); err == nil && ManifestKey(d) == k {
			jobs = append(jobs, d)
		}
	}
	return jobs, nil
}

// ResolveJob turns a job key, or a unique prefix of one (at least four hex
// digits, as logs print twelve), into the key of a job that has a manifest.
// No match is ErrJobNotFound; several are an *AmbiguousJobError listing them.
func (l *Lake) ResolveJob(ctx context.Context, s string) (Digest, error) {
	h := strings.TrimPrefix(s, digestPrefix)
	if len(h) == 64 {
		d, err := ParseDigest(h)
		if err != nil {
			return d, fmt.Errorf("%w: %w", ErrBadJobKey, err)
		}
		ok, err := l.Exists(ctx, ManifestKey(d))
		if err != nil {
			return d, err
		}
		if !ok {
			return d, JobNotFound(h, l.URL)
		}
		return d, nil
	}
	if len(h) < minJobPrefix || len(h) > 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return Digest{}, fmt.Errorf("%w %q: want the 64 lower-case hex digits of a job key or a unique prefix of at least %d", ErrBadJobKey, s, minJobPrefix)
	}
	jobs, err := l.JobKeys(ctx)
	if err != nil {
		return Digest{}, err
	}
	var match []Digest
	for _, d := range jobs {
		if strings.HasPrefix(d.Hex(), h) {
			match = append(match, d)
		}
	}
	switch len(match) {
	case 0:
		return Digest{}, JobNotFound(h, l.URL)
	case 1:
		return match[0], nil
	}
	e := &AmbiguousJobError{Prefix: h}
	for _, d := range match {
		e.Candidates = append(e.Candidates, d.Hex())
	}
	return Digest{}, e
}

// Tip returns the last event of a shard, or a zero Event (State "") if none,
// reading that event alone: cheaper than Last, which reads and checks the
// whole sequence, for listings that only show the current state.
func (g *Ledger) Tip(ctx context.Context, job Digest, shard string) (Event, error) {
	keys, err := g.eventKeys(ctx, job, shard)
	if err != nil {
		return Event{}, err
	}
	return g.TipOf(ctx, job, shard, keys)
}

// TipOf is Tip of a shard whose event keys, in sequence order, a listing
// has already found (ListLedgers).
func (g *Ledger) TipOf(ctx context.Context, job Digest, shard string, keys []string) (Event, error) {
	if len(keys) == 0 {
		return Event{}, nil
	}
	k := keys[len(keys)-1]
	var e Event
	if err := g.Lake.GetJSON(ctx, k, FormatEvent, &e); err != nil {
		return Event{}, err
	}
	if e.Seq != len(keys) || LedgerKey(job, shard, e.Seq) != k {
		return Event{}, fmt.Errorf("ledger %s/%s: event %s has seq %d, want %d (gap or misnamed event): %w", job.Hex(), shard, k, e.Seq, len(keys), ErrCorrupt)
	}
	return e, nil
}

// ListLedgers lists the event keys of every shard of every job in one
// listing, each shard's in sequence order: a command that shows every job's
// state (`jobs`) makes one listing of the lake instead of one a shard, each
// a request on an object store.
func (l *Lake) ListLedgers(ctx context.Context) (map[Digest]map[string][]string, error) {
	names, err := l.List(ctx, LedgerArea)
	if err != nil {
		return nil, err
	}
	return groupLedgerKeys(names), nil
}

// groupLedgerKeys groups the event keys among names by job and shard, each
// shard's in sequence order; other names are left out.
func groupLedgerKeys(names []string) map[Digest]map[string][]string {
	out := map[Digest]map[string][]string{}
	for _, k := range names {
		job, shard, _, ok := ParseLedgerKey(k)
		if !ok {
			continue
		}
		if out[job] == nil {
			out[job] = map[string][]string{}
		}
		out[job][shard] = append(out[job][shard], k)
	}
	for _, shards := range out {
		for _, keys := range shards {
			sort.Strings(keys)
		}
	}
	return out
}

// ListReports lists every job's report keys in one listing.
func (l *Lake) ListReports(ctx context.Context) (map[Digest][]string, error) {
	names, err := l.List(ctx, ReportArea)
	if err != nil {
		return nil, err
	}
	out := map[Digest][]string{}
	for _, k := range names {
		if job, ok := jobMarkerKey(k, ReportArea); ok {
			out[job] = append(out[job], k)
		}
	}
	return out, nil
}
