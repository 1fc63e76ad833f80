package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"sort"

	"github.com/parquet-go/parquet-go"
	"gocloud.dev/blob"
	"golang.org/x/sync/errgroup"

	"github.com/batchlake/batchlake/lake"
)

// Bounds of the search for the job a refused result file belongs to
// (LikelyJob): it runs only when ingest refuses a file, lists the expected
// tables' keys and reads only the custom_id and job_key columns of those it
// picks. Variables so that a test can lower them.
var (
	likelyMaxJobs        = 64
	likelyMaxBytes int64 = 256 << 20
)

// IDMatch is how many lines of an id sample carry the ids of one job.
type IDMatch struct {
	JobKey string `json:"job_key"`
	Tenant string `json:"tenant"`
	Lines  int64  `json:"lines"`
	// Searched is how many other jobs LikelyJob compared the sample with,
	// Bounded whether it left some out (see likelyMaxJobs, likelyMaxBytes).
	Searched int  `json:"searched_jobs"`
	Bounded  bool `json:"bounded"`
}

type sampleRow struct {
	Sample   int32  `parquet:"sample"`
	CustomID string `parquet:"custom_id"`
}

// matchIDs counts each sample's lines whose id is an expected custom_id, per
// job of the given expected-table files: out[i] is sample i's jobs, the most
// lines first. The samples share one read of the expected files.
func (e *Engine) matchIDs(ctx context.Context, samples [][]string, expectedKeys []string) ([][]IDMatch, error) {
	var rows []sampleRow
	for i, ids := range samples {
		for _, id := range ids {
			rows = append(rows, sampleRow{Sample: int32(i), CustomID: id})
		}
	}
	sample := filepath.Join(e.tmp, "id-sample.parquet")
	if err := parquet.WriteFile(sample, rows); err != nil {
		return nil, fmt.Errorf("id sample: %w", err)
	}
	expected, err := LocalFiles[lake.ExpectedRow](ctx, e, expectedKeys)
	if err != nil {
		return nil, err
	}
	q, err := e.QueryFile(ctx, "ingest_match.sql", map[string]string{"Sample": quote(sample), "Expected": sqlList(expected)})
	if err != nil {
		return nil, err
	}
	defer q.Close()
	out := make([][]IDMatch, len(samples))
	for q.Next() {
		var i int32
		var m IDMatch
		if err := q.Scan(&i, &m.JobKey, &m.Lines); err != nil {
			return nil, fmt.Errorf("sql ingest_match.sql: %w", err)
		}
		if i < 0 || int(i) >= len(out) {
			return nil, fmt.Errorf("sql ingest_match.sql: sample %d of %d", i, len(out))
		}
		out[i] = append(out[i], m)
	}
	return out, q.Err()
}

// MatchIDs is how many of the sample's lines carry a custom_id of job m.
func (e *Engine) MatchIDs(ctx context.Context, m *lake.Manifest, ids []string) (int64, error) {
	own, err := e.MatchEach(ctx, m, [][]string{ids})
	if err != nil {
		return 0, err
	}
	return own[0], nil
}

// MatchEach is MatchIDs of several samples (a sample per result file) in one
// read of job m's expected files: own[i] is sample i's.
func (e *Engine) MatchEach(ctx context.Context, m *lake.Manifest, samples [][]string) ([]int64, error) {
	return matchEach(ctx, e.stage, m, samples)
}

// MatchEach is Engine.MatchEach without a DuckDB session (it needs none):
// ingest's check of every file it is given, which opens one only to search
// for the job a refused file belongs to (Engine.LikelyJob). o gives the
// cache of a remote lake's table files.
func MatchEach(ctx context.Context, l *lake.Lake, o EngineOptions, m *lake.Manifest, samples [][]string) ([]int64, error) {
	st, err := newStager(l, o.CacheDir, o.CacheBytes)
	if err != nil {
		return nil, err
	}
	return matchEach(ctx, st, m, samples)
}

// matchEach counts each sample's lines whose id is one of job m's, the
// expected files staged by st. The files' custom_id columns are read by Go,
// on all cores, and looked up among the samples' ids (a set of at most a few
// tens of thousands), so the job's ids are never held. (A DuckDB semi-join
// over the same files costs about a third of the ingest of a provider batch's
// 50,000 answers.)
func matchEach(ctx context.Context, st *stager, m *lake.Manifest, samples [][]string) ([]int64, error) {
	own := make([]int64, len(samples))
	want := map[string]bool{} // a sample's id: whether the job expects it
	for _, ids := range samples {
		for _, id := range ids {
			want[id] = false
		}
	}
	if len(want) == 0 {
		return own, nil
	}
	paths, err := st.localAll(ctx, m.ExpectedFiles)
	if err != nil {
		return nil, err
	}
	found := make([][]string, len(paths))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, p := range paths {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			return lake.ScanCustomIDs(p, func(id []byte) {
				if _, ok := want[string(id)]; ok {
					found[i] = append(found[i], string(id))
				}
			})
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("id match: %w", err)
	}
	for _, ids := range found {
		for _, id := range ids {
			want[id] = true
		}
	}
	for i, ids := range samples {
		for _, id := range ids {
			if want[id] {
				own[i]++
			}
		}
	}
	return own, nil
}

// LikelyJob looks for the job whose ids the sample carries, among the lake's
// other jobs: the same tenant's first, newest first, at most likelyMaxJobs
// jobs and likelyMaxBytes of expected tables. It returns the job with the
// most matching lines (nil if none matches), with how far it searched.
func (e *Engine) LikelyJob(ctx context.Context, m *lake.Manifest, ids []string) (*IDMatch, error) {
	type cand struct {
		job    lake.Digest
		tenant string
		keys   []string
		bytes  int64
		newest int64
	}
	byJob := map[lake.Digest]*cand{}
	it := e.lake.Bucket.List(&blob.ListOptions{Prefix: lake.TablePrefix("expected")})
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list expected tables: %w", err)
		}
		table, tenant, job, _, ok := lake.ParseTableFileKey(o.Key)
		if !ok || table != "expected" || job.Hex() == m.JobKey {
			continue
		}
		c := byJob[job]
		if c == nil {
			c = &cand{job: job, tenant: tenant}
			byJob[job] = c
		}
		c.keys = append(c.keys, o.Key)
		c.bytes += o.Size
		c.newest = max(c.newest, o.ModTime.UnixNano())
	}
	cands := make([]*cand, 0, len(byJob))
	for _, c := range byJob {
		cands = append(cands, c)
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if (a.tenant == m.Tenant) != (b.tenant == m.Tenant) {
			return a.tenant == m.Tenant
		}
		if a.newest != b.newest {
			return a.newest > b.newest
		}
		return a.job.Hex() < b.job.Hex()
	})
	var keys []string
	tenants := map[string]string{}
	var total int64
	searched := 0
	for _, c := range cands {
		if searched == likelyMaxJobs || total+c.bytes > likelyMaxBytes {
			break
		}
		keys = append(keys, c.keys...)
		tenants[c.job.Hex()] = c.tenant
		total += c.bytes
		searched++
	}
	res := &IDMatch{Searched: searched, Bounded: searched < len(cands)}
	if len(keys) == 0 || len(ids) == 0 {
		return res, nil
	}
	got, err := e.matchIDs(ctx, [][]string{ids}, keys)
	if err != nil {
		return nil, err
	}
	for _, g := range got[0] {
		// An expected file without a manifest is an unfinished plan: no job.
		d, _ := lake.ParseDigest(g.JobKey)
		if ok, err := e.lake.Exists(ctx, lake.ManifestKey(d)); err != nil {
			return nil, err
		} else if ok {
			res.JobKey, res.Tenant, res.Lines = g.JobKey, tenants[g.JobKey], g.Lines
			return res, nil
		}
	}
	return res, nil
}
