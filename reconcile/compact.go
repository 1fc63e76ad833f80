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
// views read: one content-addressed Parquet object per view source. A
// session then reads a dozen files for the jobs it covers instead of every
// job's markers and table files, and reads live only the jobs that are new
// or whose markers changed since (their marker fingerprint differs). verify
// re-reads every covered job live and checks the compaction holds exactly
// those rows (VerifyCompactions).

// CompactResult is what Compact wrote.
type CompactResult struct {
	Key    string            `json:"key"`
	Jobs   int               `json:"jobs"`
	Tables map[string]string `json:"tables"`
}

// jobKeyRow is one row of the job lists the compaction check reads.
type jobKeyRow struct {
	JobKey string `parquet:"job_key"`
}

// Compact writes a compaction of every job in the lake and its marker. The
// jobs the latest compaction covers and whose markers are unchanged are
// taken from it; only new and changed jobs are read.
func Compact(ctx context.Context, l *lake.Lake, o EngineOptions, now func() time.Time) (*CompactResult, error) {
	if now == nil {
		now = time.Now
	}
	e, err := OpenEngine(l, o)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	// Fingerprints first: a job whose markers change while it is read gets
	// a fingerprint older than its rows, so no session and no verify trusts
	// its rows (they read it live).
	marks, err := l.JobMarkers(ctx)
	if err != nil {
		return nil, err
	}
	all, err := l.JobKeys(ctx)
	if err != nil {
		return nil, err
	}
	// The latest compaction's rows of the jobs unchanged since are taken
	// as they are: compacting again reads only new and changed jobs.
	prev, _, err := l.LatestCompaction(ctx)
	if err != nil {
		return nil, err
	}
	var comp *compactionUse
	if prev != nil {
		comp = newCompactionUse(prev, marks, Scope{})
	}
	var ds []lake.Digest
	for _, d := range all {
		if !comp.covers(d.Hex()) {
			ds = append(ds, d)
		}
	}
	src, ms, err := readJobs(ctx, newManifests(l), ds, nil)
	if err != nil {
		return nil, err
	}
	jobs := make([]lake.CompactedJob, 0, len(ms))
	for _, m := range ms {
		jobs = append(jobs, lake.CompactedJob{JobKey: m.JobKey, Tenant: m.Tenant, Markers: marks[m.JobKey]})
	}
	if comp != nil {
		for _, j := range prev.Jobs {
			if comp.covers(j.JobKey) {
				jobs = append(jobs, j)
			}
		}
	}
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].JobKey < jobs[j].JobKey })
	dir := filepath.Join(e.tmp, "compact")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	e.emptyDir = dir
	res := &CompactResult{Jobs: len(jobs), Tables: map[string]string{}}
	for _, t := range e.viewTables(ctx, dir, src) {
		paths, err := t.files()
		if err != nil {
			return nil, err
		}
		q := "SELECT * FROM read_parquet(" + sqlList(paths) + ", union_by_name = true)"
		if comp != nil {
			expr, _, err := comp.source(ctx, e, t)
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
	}
	c := &lake.Compaction{CreatedAt: now().UTC(), Jobs: jobs, Tables: res.Tables}
	if res.Key, err = l.PutCompaction(ctx, c); err != nil {
		return nil, err
	}
	return res, nil
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
// are unchanged since (nil: no compaction).
//
// The marker and the listing of the jobs' markers are read at once: both
// grow with the lake (a marker names every job; the listing opens a folder
// or two a job), and one waits on the disk while the other parses.
func (e *Engine) useCompaction(ctx context.Context, scope Scope) (*compactionUse, error) {
	var (
		c     *lake.Compaction
		marks map[string]string
	)
	eg, ectx := errgroup.WithContext(ctx)
	eg.Go(func() (err error) {
		c, _, err = e.lake.LatestCompaction(ectx)
		return err
	})
	eg.Go(func() (err error) {
		marks, err = e.lake.JobMarkers(ectx)
		return err
	})
	if err := eg.Wait(); err != nil || c == nil {
		return nil, err
	}
	return newCompactionUse(c, marks, scope), nil
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
// session reads from the compaction, and the local file it reads.
func (u *compactionUse) source(ctx context.Context, e *Engine, t viewTable) (string, []string, error) {
	key, ok := u.c.Tables[t.table]
	if !ok {
		return "", nil, fmt.Errorf("compaction has no %s table", t.table)
	}
	p, err := e.stage.local(ctx, key)
	if err != nil {
		return "", nil, err
	}
	empty, err := t.empty()
	if err != nil {
		return "", nil, err
	}
	var where []string
	if len(u.stale) > 0 {
		where = append(where, "job_key NOT IN "+sqlTuple(u.stale))
	}
	if u.tenant != "" {
		where = append(where, "tenant = "+quote(u.tenant))
	}
	q := "SELECT * FROM read_parquet(" + sqlList([]string{empty, p}) + ", union_by_name = true)"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return q, []string{empty, p}, nil
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
	marks, err := l.JobMarkers(ctx)
	if err != nil {
		return nil, err
	}
	ps, err := verifyCompaction(ctx, l, o, k, c, marks)
	if err != nil {
		return nil, fmt.Errorf("verify compaction %s: %w", k, err)
	}
	return ps, nil
}

func verifyCompaction(ctx context.Context, l *lake.Lake, o EngineOptions, key string, c *lake.Compaction, marks map[string]string) ([]lake.Problem, error) {
	e, err := OpenEngine(l, o)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	dir := filepath.Join(e.tmp, "verify")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	e.emptyDir = dir
	var (
		fresh, named []jobKeyRow
		ds           []lake.Digest
		tenants      = map[string]string{}
	)
	for _, j := range c.Jobs {
		named = append(named, jobKeyRow{j.JobKey})
		if j.Markers == "" || marks[j.JobKey] != j.Markers {
			continue
		}
		d, err := lake.ParseDigest(j.JobKey)
		if err != nil {
			return []lake.Problem{{Key: key, Severity: lake.SeverityError, Message: fmt.Sprintf("job %q: %v", j.JobKey, err)}}, nil
		}
		ds = append(ds, d)
		tenants[d.Hex()] = j.Tenant
		fresh = append(fresh, jobKeyRow{j.JobKey})
	}
	src, ms, err := readJobs(ctx, newManifests(l), ds, nil)
	if err != nil {
		return []lake.Problem{{Key: key, Severity: lake.SeverityError, Message: fmt.Sprintf("reading its jobs: %v", err)}}, nil
	}
	for _, m := range ms {
		if m.Tenant != tenants[m.JobKey] {
			return []lake.Problem{{Key: key, Severity: lake.SeverityError, Message: fmt.Sprintf("job %s: tenant %q, the manifest says %q", m.JobKey, tenants[m.JobKey], m.Tenant)}}, nil
		}
	}
	freshPath, err := smallTable(dir, "fresh-jobs", fresh)
	if err != nil {
		return nil, err
	}
	namedPath, err := smallTable(dir, "named-jobs", named)
	if err != nil {
		return nil, err
	}
	var problems []lake.Problem
	for _, t := range e.viewTables(ctx, dir, src) {
		ck, ok := c.Tables[t.table]
		if !ok {
			problems = append(problems, lake.Problem{Key: key, Severity: lake.SeverityError, Message: fmt.Sprintf("compaction has no %s table", t.table)})
			continue
		}
		p, err := e.stage.local(ctx, ck)
		if err != nil {
			problems = append(problems, lake.Problem{Key: key, Severity: lake.SeverityError, Message: fmt.Sprintf("compaction table %s: %v", t.table, err)})
			continue
		}
		live, err := t.files()
		if err != nil {
			return nil, err
		}
		empty, err := t.empty()
		if err != nil {
			return nil, err
		}
		rows, err := e.QueryFile(ctx, "compact_check.sql", map[string]string{"Compacted": sqlList([]string{empty, p}), "Live": sqlList(live),
			"Fresh": sqlList(freshPath), "Named": sqlList(namedPath)})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.table, err)
		}
		var differing, strays int64
		if rows.Next() {
			err = rows.Scan(&differing, &strays)
		}
		rows.Close()
		if err != nil {
			return nil, err
		}
		if differing > 0 {
			problems = append(problems, lake.Problem{Key: key, Severity: lake.SeverityError,
				Message: fmt.Sprintf("compaction table %s: %d rows differ from its jobs' sources (run batchlake compact again; sessions must not use it)", t.table, differing)})
		}
		if strays > 0 {
			problems = append(problems, lake.Problem{Key: key, Severity: lake.SeverityError,
				Message: fmt.Sprintf("compaction table %s: %d rows of jobs the compaction does not name", t.table, strays)})
		}
	}
	return problems, nil
}

// markerReaders is how many jobs' markers are read at once: reading is a
// round trip per object on an object store, and a few parallel reads keep a
// local lake's cores busy parsing.
const markerReaders = 8

// readJobs reads the markers of the jobs ds, several at a time, into one
// viewSources in the order of ds. keep, if set, is asked about each manifest
// first: a job it refuses is skipped. It returns the manifests kept.
func readJobs(ctx context.Context, c *manifests, ds []lake.Digest, keep func(*lake.Manifest) bool) (*viewSources, []*lake.Manifest, error) {
	l := c.l
	per := make([]*viewSources, len(ds))
	ms := make([]*lake.Manifest, len(ds))
	g := lake.NewLedger(l, "")
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(markerReaders)
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
			if err := s.addJob(ectx, l, g, d, m); err != nil {
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
