package reconcile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/batchlake/batchlake/lake"
)

// A compaction (lake.Compaction) holds, for many jobs at once, the rows the
// views read, in segments of one content-addressed Parquet object per view
// source. A session then reads a few dozen files for the jobs it covers
// instead of every job's markers and table files, and reads live only the
// jobs that are new or whose markers changed since (their marker
// fingerprint differs). verify re-reads every covered job live and checks
// the compaction holds exactly those rows (VerifyCompactions).

// CompactResult is what Compact wrote.
type CompactResult struct {
	Key string `json:"key"`
	// Jobs is how many jobs the compaction covers, in Segments segments.
	Jobs     int `json:"jobs"`
	Segments int `json:"segments"`
	// JobsWritten is how many jobs' rows this run wrote into its new
	// segment (new and changed jobs, and those of the segments it merged);
	// the other segments are the latest compaction's, named again.
	JobsWritten int `json:"jobs_written"`
	// Tables are the new segment's objects (none when nothing changed).
	Tables map[string]string `json:"tables"`
}

// jobKeyRow is one row of the job lists the compaction check reads.
type jobKeyRow struct {
	JobKey string `parquet:"job_key"`
}

// segmentJobRow is a job and the local file of its segment's object, as
// the compaction check reads them.
type segmentJobRow struct {
	File   string `parquet:"file"`
	JobKey string `parquet:"job_key"`
}

// Compact writes a compaction of every job in the lake and its marker.
//
// The latest compaction's segments whose jobs are all unchanged are kept as
// they are. One new segment holds the rows of the new and changed jobs, read
// live, and the unchanged jobs of the segments that held a changed job. It
// also takes in the newest kept segments while each holds no more jobs than
// it has gathered so far (a binary counter's carries), so the segments stay
// about logarithmic in number and each job's rows are written again only
// that many times. When no job is new or changed, the latest compaction
// stands and nothing is written.
func Compact(ctx context.Context, l *lake.Lake, o EngineOptions, now func() time.Time) (*CompactResult, error) {
	if now == nil {
		now = time.Now
	}
	e, err := OpenEngine(l, o)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	if err := e.ExecFile(ctx, "compact_settings.sql", nil); err != nil {
		return nil, err
	}
	// Fingerprints first: a job whose markers change while it is read gets
	// a fingerprint older than its rows, so no session and no verify trusts
	// its rows (they read it live). The rows are read through the same
	// listing, so they are those of the markers fingerprinted.
	listed, err := l.ListMarkerKeys(ctx)
	if err != nil {
		return nil, err
	}
	marks := listed.Fingerprints()
	all, err := l.JobKeys(ctx)
	if err != nil {
		return nil, err
	}
	prev, prevKey, err := l.LatestCompaction(ctx)
	if err != nil {
		return nil, err
	}
	var comp *compactionUse
	if prev != nil {
		comp = newCompactionUse(prev, marks, Scope{})
	}
	// A job without markers has no fingerprint to trust rows by: sessions
	// read it live, so the compaction leaves it out.
	var ds []lake.Digest
	for _, d := range all {
		if !comp.covers(d.Hex()) && marks[d.Hex()] != "" {
			ds = append(ds, d)
		}
	}
	plan := planSegments(prev, comp, len(ds))
	if prev != nil && len(ds) == 0 && len(plan.merged) == 0 {
		return &CompactResult{Key: prevKey, Jobs: len(prev.Jobs), Segments: len(plan.kept), Tables: map[string]string{}}, nil
	}
	dir := filepath.Join(e.tmp, "compact")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	e.emptyDir = dir
	// The live jobs' markers are read a batch at a time (only the names of
	// their table files are kept), and DuckDB reads their files a batch at
	// a time (copyInBatches): neither grows with the lake.
	tables := e.viewTables(ctx, dir, &viewSources{})
	live := make([][]string, len(tables))
	fresh := make([]lake.CompactedJob, 0, len(ds)+plan.mergedJobs())
	perBatch, files := o.compactBatches()
	batches := max(1, (len(ds)+perBatch-1)/perBatch)
	for b := range batches {
		batch := ds[min(b*perBatch, len(ds)):min((b+1)*perBatch, len(ds))]
		src, ms, err := readJobs(ctx, newManifests(l), batch, nil, listed)
		if err != nil {
			return nil, err
		}
		if compactRead != nil {
			compactRead("", len(batch))
		}
		for _, m := range ms {
			fresh = append(fresh, lake.CompactedJob{JobKey: m.JobKey, Tenant: m.Tenant, Markers: marks[m.JobKey]})
		}
		for i, t := range e.viewTables(ctx, filepath.Join(dir, fmt.Sprintf("batch-%d", b)), src) {
			paths, err := t.files()
			if err != nil {
				return nil, err
			}
			live[i] = append(live[i], paths...)
		}
	}
	for _, s := range plan.merged {
		fresh = append(fresh, s.jobs...)
	}
	res := &CompactResult{JobsWritten: len(fresh), Tables: map[string]string{}}
	if len(fresh) > 0 {
		for i, t := range tables {
			src, err := e.compactSource(ctx, dir, t.table, live[i], files)
			if err != nil {
				return nil, fmt.Errorf("compact %s: %w", t.table, err)
			}
			q := "SELECT * FROM " + src
			if len(plan.merged) > 0 {
				expr, _, err := comp.segmentsSource(ctx, e, t, plan.merged)
				if err != nil {
					return nil, err
				}
				q += " UNION ALL BY NAME " + expr
			}
			out := filepath.Join(dir, t.table+".compact.parquet")
			if err := e.ExecFile(ctx, "compact_copy.sql", map[string]string{"Query": q, "Out": quote(out)}); err != nil {
				return nil, fmt.Errorf("compact %s: %w", t.table, err)
			}
			d, _, err := l.PutFile(ctx, out, lake.ObjectKey)
			if err != nil {
				return nil, fmt.Errorf("compact %s: %w", t.table, err)
			}
			res.Tables[t.table] = lake.ObjectKey(d)
			// The parts are read: their space in --tmp-dir is freed.
			if err := os.RemoveAll(filepath.Join(dir, "parts")); err != nil {
				return nil, err
			}
		}
	}
	c := &lake.Compaction{CreatedAt: now().UTC()}
	for _, s := range plan.kept {
		for _, j := range s.jobs {
			j.Segment = len(c.Segments)
			c.Jobs = append(c.Jobs, j)
		}
		c.Segments = append(c.Segments, lake.CompactionSegment{Tables: s.tables})
	}
	if len(fresh) > 0 {
		for _, j := range fresh {
			j.Segment = len(c.Segments)
			c.Jobs = append(c.Jobs, j)
		}
		c.Segments = append(c.Segments, lake.CompactionSegment{Tables: res.Tables})
	}
	sort.Slice(c.Jobs, func(i, j int) bool { return c.Jobs[i].JobKey < c.Jobs[j].JobKey })
	res.Jobs, res.Segments = len(c.Jobs), len(c.Segments)
	if res.Key, err = l.PutCompaction(ctx, c); err != nil {
		return nil, err
	}
	return res, nil
}

// A compaction reads the live jobs' markers defaultCompactJobs jobs at a
// time, and one statement of it reads defaultCompactFiles table files at
// most: DuckDB holds a reader of every file a union_by_name scan reads
// until the statement ends, about 85 KB a file (one statement over a view
// source of 10,044 jobs' files peaked above 1 GiB).
const (
	defaultCompactJobs  = 2000
	defaultCompactFiles = 1000
)

// compactRead, if set (by tests), is told of each batch of jobs a
// compaction reads (table "", n jobs) and of each statement of a compaction
// or of verify's check of one that reads table files (the view source, n
// live table files or parts).
var compactRead func(table string, n int)

// compactBatches is how many jobs a compaction reads at a time, and how
// many files one of its statements reads at most.
func (o EngineOptions) compactBatches() (jobs, files int) {
	jobs, files = defaultCompactJobs, defaultCompactFiles
	if o.CompactJobs > 0 {
		jobs = o.CompactJobs
	}
	if o.CompactFiles > 1 {
		files = o.CompactFiles
	}
	return jobs, files
}

// compactSource is a table expression of one view source's table files
// (table, for compactRead) that a statement reads at most batch files of:
// copied in parts under dir first when there are more (copyInBatches), then
// read as one table (compactScan).
func (e *Engine) compactSource(ctx context.Context, dir, table string, files []string, batch int) (string, error) {
	paths, err := e.copyInBatches(ctx, dir, table, files, batch)
	if err != nil {
		return "", err
	}
	if compactRead != nil {
		compactRead(table, len(paths))
	}
	return compactScan(ctx, paths)
}

// compactScan is a table expression of the table files paths as one table,
// for a compaction's statements: parquetScan's groups of one schema where
// there are enough files, else one union_by_name read. Either way the files'
// key=value folders are not read as hive partitions, which would give the
// rows those as columns.
func compactScan(ctx context.Context, paths []string) (string, error) {
	if len(paths) >= groupedScanFiles {
		return parquetScan(ctx, paths)
	}
	return "read_parquet(" + sqlList(paths) + ", union_by_name = true, hive_partitioning = false)", nil
}

// copyInBatches returns files as they are when there are batch or fewer;
// else it copies them, batch files a statement, into Parquet files under
// dir/parts until batch or fewer remain, and returns those: the same rows,
// read at most batch files at a time. (batch is 2 or more.)
func (e *Engine) copyInBatches(ctx context.Context, dir, table string, files []string, batch int) ([]string, error) {
	parts := filepath.Join(dir, "parts")
	for round := 0; len(files) > batch; round++ {
		if err := os.MkdirAll(parts, 0o755); err != nil {
			return nil, err
		}
		var next []string
		for i := 0; i < len(files); i += batch {
			chunk := files[i:min(i+batch, len(files))]
			out := filepath.Join(parts, fmt.Sprintf("%s-%d-%d.parquet", table, round, len(next)))
			if compactRead != nil {
				compactRead(table, len(chunk))
			}
			src, err := compactScan(ctx, chunk)
			if err != nil {
				return nil, err
			}
			q := "SELECT * FROM " + src
			if err := e.ExecFile(ctx, "compact_copy.sql", map[string]string{"Query": q, "Out": quote(out)}); err != nil {
				return nil, err
			}
			next = append(next, out)
		}
		files = next
	}
	return files, nil
}

// segment is one segment of the latest compaction as Compact sees it: its
// objects and the jobs in it that are unchanged since.
type segment struct {
	tables map[string]string
	jobs   []lake.CompactedJob
	// changed: a job in it is not covered any more (its markers changed).
	changed bool
}

// segmentPlan is which of the latest compaction's segments a compaction
// keeps as they are (kept, oldest first) and which it writes again into its
// new segment (merged).
type segmentPlan struct {
	kept, merged []segment
}

// mergedJobs is how many unchanged jobs the merged segments hold.
func (p segmentPlan) mergedJobs() int {
	n := 0
	for _, s := range p.merged {
		n += len(s.jobs)
	}
	return n
}

// planSegments sorts the latest compaction's segments (prev, used as comp)
// for a compaction that reads live jobs: those holding a changed job go
// into the new segment, and so do the newest of the others while each
// holds no more jobs than the new segment has gathered.
func planSegments(prev *lake.Compaction, comp *compactionUse, live int) segmentPlan {
	var p segmentPlan
	if prev == nil {
		return p
	}
	tables := prev.SegmentTables()
	segs := make([]segment, len(tables))
	for i, ts := range tables {
		segs[i].tables = ts
	}
	for _, j := range prev.Jobs {
		s := &segs[j.Segment]
		if comp.covers(j.JobKey) {
			s.jobs = append(s.jobs, j)
		} else {
			s.changed = true
		}
	}
	gathered := live
	for _, s := range segs {
		if s.changed {
			p.merged = append(p.merged, s)
			gathered += len(s.jobs)
		} else {
			p.kept = append(p.kept, s)
		}
	}
	for gathered > 0 && len(p.kept) > 0 && len(p.kept[len(p.kept)-1].jobs) <= gathered {
		s := p.kept[len(p.kept)-1]
		p.kept = p.kept[:len(p.kept)-1]
		p.merged = append(p.merged, s)
		gathered += len(s.jobs)
	}
	return p
}

// compactionUse is the lake's latest compaction as one session uses it.
type compactionUse struct {
	c *lake.Compaction
	// covered: the jobs whose markers are unchanged since the compaction.
	covered map[string]bool
	// stale: the jobs it names whose markers changed (read live instead).
	stale  []string
	tenant string
}

// useCompaction finds the lake's latest compaction and which of its jobs
// are unchanged since (nil: no compaction), and returns the listing of the
// jobs' markers it fingerprinted them by, for the jobs read live.
//
// The marker and the listing of the jobs' markers are read at once: both
// grow with the lake (a marker names every job; the listing opens a folder
// or two a job), and one waits on the disk while the other parses.
func (e *Engine) useCompaction(ctx context.Context, scope Scope) (*compactionUse, *lake.MarkerKeys, error) {
	var (
		c      *lake.Compaction
		listed *lake.MarkerKeys
	)
	eg, ectx := errgroup.WithContext(ctx)
	eg.Go(func() (err error) {
		c, _, err = e.lake.LatestCompaction(ectx)
		return err
	})
	eg.Go(func() (err error) {
		listed, err = e.lake.ListMarkerKeys(ectx)
		return err
	})
	if err := eg.Wait(); err != nil {
		return nil, nil, err
	}
	if c == nil {
		return nil, listed, nil
	}
	return newCompactionUse(c, listed.Fingerprints(), scope), listed, nil
}

// newCompactionUse sorts c's jobs into those whose markers (marks) are
// unchanged since c and the stale rest.
func newCompactionUse(c *lake.Compaction, marks map[string]string, scope Scope) *compactionUse {
	u := &compactionUse{c: c, covered: make(map[string]bool, len(c.Jobs)), tenant: scope.Tenant}
	for _, j := range c.Jobs {
		if j.Markers != "" && marks[j.JobKey] == j.Markers {
			u.covered[j.JobKey] = true
		} else {
			u.stale = append(u.stale, j.JobKey)
		}
	}
	return u
}

// covers says whether the session reads job from the compaction.
func (u *compactionUse) covers(job string) bool { return u != nil && u.covered[job] }

// source is the SELECT of one view source's compacted rows for the jobs the
// session reads from the compaction, and the local files it reads.
func (u *compactionUse) source(ctx context.Context, e *Engine, t viewTable) (string, []string, error) {
	keys, ok := u.c.Objects(t.table)
	if !ok {
		return "", nil, fmt.Errorf("compaction has no %s table", t.table)
	}
	return u.read(ctx, e, t, keys, u.tenant)
}

// segmentsSource is the SELECT of one view source's rows in segs, but for
// the jobs whose markers changed since (Compact writes those segments
// again, the changed jobs read live).
func (u *compactionUse) segmentsSource(ctx context.Context, e *Engine, t viewTable, segs []segment) (string, []string, error) {
	var keys []string
	for _, s := range segs {
		k, ok := s.tables[t.table]
		if !ok {
			return "", nil, fmt.Errorf("compaction has no %s table", t.table)
		}
		keys = append(keys, k)
	}
	return u.read(ctx, e, t, keys, "")
}

// read is the SELECT of the rows of objects keys, each checked against its
// digest as it is staged, without the changed jobs and, if tenant is set,
// of that tenant only.
func (u *compactionUse) read(ctx context.Context, e *Engine, t viewTable, keys []string, tenant string) (string, []string, error) {
	empty, err := t.empty()
	if err != nil {
		return "", nil, err
	}
	staged, err := e.stageObjects(ctx, keys)
	if err != nil {
		return "", nil, err
	}
	files := append([]string{empty}, staged...)
	var where []string
	if len(u.stale) > 0 {
		where = append(where, "job_key NOT IN "+sqlTuple(u.stale))
	}
	if tenant != "" {
		where = append(where, "tenant = "+quote(tenant))
	}
	q := "SELECT * FROM read_parquet(" + sqlList(files) + ", union_by_name = true)"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return q, files, nil
}

// stageObjects is the local files of the lake's objects keys, in order,
// each checked against its digest as it is staged.
func (e *Engine) stageObjects(ctx context.Context, keys []string) ([]string, error) {
	files := make([]string, len(keys))
	for i, k := range keys {
		p, err := e.stage.local(ctx, k)
		if err != nil {
			return nil, err
		}
		files[i] = p
	}
	return files, nil
}

// sqlTuple is ('a', 'b', …).
func sqlTuple(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = quote(s)
	}
	return "(" + strings.Join(q, ", ") + ")"
}

// VerifyCompactions checks the latest compaction (the one sessions read,
// and the one the next compaction builds on) against its sources: for each
// job it names whose markers are unchanged since, the rows of every view
// source read live from the job's markers and table files must equal the
// compaction's rows, and the compaction may hold no row of a job it does
// not name. Jobs whose markers changed since are read live by every session
// and are not checked. Older compactions are read by nothing; lake.Verify
// checks their markers and objects.
func VerifyCompactions(ctx context.Context, l *lake.Lake, o EngineOptions) ([]lake.Problem, error) {
	c, k, err := l.LatestCompaction(ctx)
	if err != nil {
		// Sessions would fail the same way: a marker that does not open.
		return []lake.Problem{{Key: lake.CompactionArea, Severity: lake.SeverityError, Message: fmt.Sprintf("the latest compaction cannot be read: %v", err)}}, nil
	}
	if c == nil {
		return nil, nil
	}
	listed, err := l.ListMarkerKeys(ctx)
	if err != nil {
		return nil, err
	}
	ps, err := verifyCompaction(ctx, l, o, k, c, listed)
	if err != nil {
		return nil, fmt.Errorf("verify compaction %s: %w", k, err)
	}
	return ps, nil
}

func verifyCompaction(ctx context.Context, l *lake.Lake, o EngineOptions, key string, c *lake.Compaction, listed *lake.MarkerKeys) ([]lake.Problem, error) {
	marks := listed.Fingerprints()
	e, err := OpenEngine(l, o)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	if err := e.ExecFile(ctx, "compact_settings.sql", nil); err != nil {
		return nil, err
	}
	dir := filepath.Join(e.tmp, "verify")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	e.emptyDir = dir
	var (
		ds      []lake.Digest
		tenants = map[string]string{}
	)
	for _, j := range c.Jobs {
		if j.Markers == "" || marks[j.JobKey] != j.Markers {
			continue
		}
		d, err := lake.ParseDigest(j.JobKey)
		if err != nil {
			return []lake.Problem{{Key: key, Severity: lake.SeverityError, Message: fmt.Sprintf("job %q: %v", j.JobKey, err)}}, nil
		}
		ds = append(ds, d)
		tenants[d.Hex()] = j.Tenant
	}
	// Each view source's compacted objects, staged (checked against their
	// digests) once; a source whose objects are missing or do not stage is
	// a problem, and is not compared.
	tables := e.viewTables(ctx, dir, &viewSources{})
	staged := make([][]string, len(tables))
	var problems []lake.Problem
	for i, t := range tables {
		cks, ok := c.Objects(t.table)
		if !ok {
			problems = append(problems, lake.Problem{Key: key, Severity: lake.SeverityError, Message: fmt.Sprintf("compaction has no %s table", t.table)})
			continue
		}
		if staged[i], err = e.stageObjects(ctx, cks); err != nil {
			problems = append(problems, lake.Problem{Key: key, Severity: lake.SeverityError, Message: fmt.Sprintf("compaction table %s: %v", t.table, err)})
		}
	}
	// The covered jobs are compared a batch at a time, as Compact reads
	// them: their markers in memory, and the live table files one
	// statement reads, stay bounded however many jobs the compaction has.
	differing := make([]int64, len(tables))
	perBatch, files := o.compactBatches()
	for b := range max(1, (len(ds)+perBatch-1)/perBatch) {
		batch := ds[min(b*perBatch, len(ds)):min((b+1)*perBatch, len(ds))]
		src, ms, err := readJobs(ctx, newManifests(l), batch, nil, listed)
		if err != nil {
			return []lake.Problem{{Key: key, Severity: lake.SeverityError, Message: fmt.Sprintf("reading its jobs: %v", err)}}, nil
		}
		fresh := make([]jobKeyRow, 0, len(ms))
		for _, m := range ms {
			if m.Tenant != tenants[m.JobKey] {
				return []lake.Problem{{Key: key, Severity: lake.SeverityError, Message: fmt.Sprintf("job %s: tenant %q, the manifest says %q", m.JobKey, tenants[m.JobKey], m.Tenant)}}, nil
			}
			fresh = append(fresh, jobKeyRow{m.JobKey})
		}
		bdir := filepath.Join(dir, fmt.Sprintf("batch-%d", b))
		freshPath, err := smallTable(bdir, "fresh-jobs", fresh)
		if err != nil {
			return nil, err
		}
		for i, t := range e.viewTables(ctx, bdir, src) {
			if staged[i] == nil {
				continue
			}
			live, err := t.files()
			if err != nil {
				return nil, err
			}
			scan, err := e.compactSource(ctx, bdir, t.table, live, files)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.table, err)
			}
			empty, err := t.empty()
			if err != nil {
				return nil, err
			}
			n, err := e.count(ctx, "compact_check.sql", map[string]string{"Compacted": sqlList(append([]string{empty}, staged[i]...)),
				"Live": scan, "Fresh": sqlList(freshPath)})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.table, err)
			}
			differing[i] += n
			if err := os.RemoveAll(filepath.Join(bdir, "parts")); err != nil {
				return nil, err
			}
		}
	}
	for i, t := range tables {
		if staged[i] == nil {
			continue
		}
		// Each segment's rows must be of the jobs the marker places in it:
		// compacting again keeps or rewrites a segment by its jobs. (The
		// marker was checked when it was read: every job's segment is one
		// of staged.)
		named := make([]segmentJobRow, len(c.Jobs))
		for k, j := range c.Jobs {
			named[k] = segmentJobRow{File: staged[i][j.Segment], JobKey: j.JobKey}
		}
		namedPath, err := smallTable(dir, "named-"+t.table, named)
		if err != nil {
			return nil, err
		}
		empty, err := t.empty()
		if err != nil {
			return nil, err
		}
		strays, err := e.count(ctx, "compact_strays.sql", map[string]string{"Compacted": sqlList(append([]string{empty}, staged[i]...)), "Named": sqlList(namedPath)})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.table, err)
		}
		if differing[i] > 0 {
			problems = append(problems, lake.Problem{Key: key, Severity: lake.SeverityError,
				Message: fmt.Sprintf("compaction table %s: %d rows differ from its jobs' sources (run batchlake compact again; sessions must not use it)", t.table, differing[i])})
		}
		if strays > 0 {
			problems = append(problems, lake.Problem{Key: key, Severity: lake.SeverityError,
				Message: fmt.Sprintf("compaction table %s: %d rows of jobs the compaction does not name in that segment", t.table, strays)})
		}
	}
	return problems, nil
}

// markerReaders is how many jobs' markers are read at once: a few parallel
// reads keep a local lake's cores busy parsing; on an object store reading
// is a round trip per object, mostly waiting, so more are in flight.
const (
	markerReaders       = 8
	remoteMarkerReaders = 32
)

// readJobs reads the markers of the jobs ds, several at a time, into one
// viewSources in the order of ds. keep, if set, is asked about each manifest
// first: a job it refuses is skipped. listed, if set, is a listing of the
// lake's markers to take the jobs' ingest records and ledger events from,
// instead of listing each job's and shard's. It returns the manifests kept.
func readJobs(ctx context.Context, c *manifests, ds []lake.Digest, keep func(*lake.Manifest) bool, listed *lake.MarkerKeys) (*viewSources, []*lake.Manifest, error) {
	l := c.l
	per := make([]*viewSources, len(ds))
	ms := make([]*lake.Manifest, len(ds))
	g := lake.NewLedger(l, "")
	eg, ectx := errgroup.WithContext(ctx)
	if _, local := l.LocalDir(); local {
		eg.SetLimit(markerReaders)
	} else {
		eg.SetLimit(remoteMarkerReaders)
	}
	for i, d := range ds {
		eg.Go(func() error {
			if err := ectx.Err(); err != nil {
				return err // another job failed: start no more
			}
			m, err := c.get(ectx, d)
			if err != nil {
				return err
			}
			if keep != nil && !keep(m) {
				return nil
			}
			var s viewSources
			if err := s.addJob(ectx, l, g, d, m, listed); err != nil {
				return err
			}
			per[i], ms[i] = &s, m
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	var all viewSources
	var kept []*lake.Manifest
	for i, s := range per {
		if s == nil {
			continue
		}
		kept = append(kept, ms[i])
		all.expected = append(all.expected, s.expected...)
		all.attempts = append(all.attempts, s.attempts...)
		all.quarantine = append(all.quarantine, s.quarantine...)
		all.outcomes = append(all.outcomes, s.outcomes...)
		all.costs = append(all.costs, s.costs...)
		all.mrows = append(all.mrows, s.mrows...)
		all.srows = append(all.srows, s.srows...)
		all.lrows = append(all.lrows, s.lrows...)
		all.frows = append(all.frows, s.frows...)
		all.irows = append(all.irows, s.irows...)
		all.brows = append(all.brows, s.brows...)
	}
	return &all, kept, nil
}
