package reconcile

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/internal/testrun"
	"github.com/batchlake/batchlake/lake"
	_ "gocloud.dev/blob/s3blob" // s3:// lakes on the test S3 server
)

// TestFlowOnS3: plan, ingest, reconcile, sql and compact on an s3:// lake
// served by a real S3-protocol server on loopback; DuckDB reads through the
// local cache.
func TestFlowOnS3(t *testing.T) {
	ctx := context.Background()
	l := s3Lake(t)
	dir := t.TempDir()
	g := generate(rand.New(rand.NewPCG(3, 3)), 150, 2, 1)
	m := planAndIngest(t, l, dir, g, 60)
	cache := filepath.Join(dir, "cache")
	rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 2, CacheDir: cache}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Expected != 150 || rep.Succeeded != g.truth.counts["succeeded"] || rep.Unknown != 2 || rep.Quarantined != 1 {
		t.Fatalf("report on s3: %+v", rep)
	}
	e, err := OpenSession(ctx, l, EngineOptions{Threads: 1, TempDir: dir, CacheDir: cache}, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var n int64
	if err := e.DB.QueryRowContext(ctx, "SELECT count(*) FROM records WHERE final_state = 'succeeded'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != rep.Succeeded {
		t.Fatalf("records view on s3 says %d succeeded, report %d", n, rep.Succeeded)
	}
	// The cache holds the table files, named by digest.
	ents, _ := os.ReadDir(cache)
	if len(ents) == 0 {
		t.Fatal("nothing staged in the cache")
	}
	for _, en := range ents {
		d, ok := lake.ParseObjectKey(en.Name())
		if !ok {
			t.Fatalf("cache entry %s not named by digest", en.Name())
		}
		if got, _, _ := lake.HashFile(filepath.Join(cache, en.Name())); got != d {
			t.Fatalf("cache entry %s holds other bytes", en.Name())
		}
	}
	// A compaction on s3 (its statements reading 2 files at most, so the
	// staged files are copied in parts first): sessions read its segment
	// through the cache and give the same count, verify checks it, and
	// compacting the unchanged lake again writes nothing.
	eo := EngineOptions{Threads: 1, TempDir: dir, CacheDir: cache, CompactFiles: 2}
	comp, err := Compact(ctx, l, eo, nil)
	if err != nil {
		t.Fatal(err)
	}
	if comp.Jobs != 1 || comp.Segments != 1 {
		t.Fatalf("compaction on s3: %+v", comp)
	}
	ec, err := OpenSession(ctx, l, eo, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	var nc int64
	if err := ec.DB.QueryRowContext(ctx, "SELECT count(*) FROM records WHERE final_state = 'succeeded'").Scan(&nc); err != nil {
		t.Fatal(err)
	}
	if nc != n {
		t.Fatalf("records view over the compaction on s3 says %d succeeded, live %d", nc, n)
	}
	if ps, err := VerifyCompactions(ctx, l, eo); err != nil || len(ps) > 0 {
		t.Fatalf("verify the compaction on s3: %+v, %v", ps, err)
	}
	if again, err := Compact(ctx, l, eo, nil); err != nil || again.Key != comp.Key || again.JobsWritten != 0 {
		t.Fatalf("compacting the unchanged s3 lake: %+v, %v; want %s and nothing written", again, err, comp.Key)
	}
	// Verify walks the s3 lake clean.
	vr, err := lake.Verify(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if !vr.OK() {
		t.Fatalf("verify on s3: %v", vr.Problems)
	}
}

// TestRemoteFilesFetchedSideBySide: a reconcile on a remote lake fetches
// the job's table files into its cache several at a time (each is a
// request's wait and a download), and reads what a local lake gives.
func TestRemoteFilesFetchedSideBySide(t *testing.T) {
	ctx := context.Background()
	w := testrun.NewLakeWatch()
	l := s3LakeWatched(t, w)
	dir := t.TempDir()
	g := generate(rand.New(rand.NewPCG(8, 8)), 120, 1, 0)
	m := planAndIngest(t, l, dir, g, 20)
	w.Reset(http.MethodGet, "tables/", ".parquet")
	rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1, CacheDir: filepath.Join(dir, "cache")}})
	if err != nil {
		t.Fatal(err)
	}
	if !w.Overlapped() {
		t.Error("the job's table files were fetched one after another")
	}
	local, lm := localTwin(t, dir, g, 20)
	want, err := Run(ctx, local, Options{JobKey: lm.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	line := func(r *Report) string {
		return fmt.Sprintf("expected=%d succeeded=%d quality_failed=%d failed_retryable=%d failed_permanent=%d missing=%d unknown=%d duplicate=%d retry=%d cost=%s",
			r.Expected, r.Succeeded, r.QualityFailed, r.FailedRetryable, r.FailedPermanent, r.Missing, r.Unknown, r.Duplicate, r.RetryRecords, r.CostUSD["total"])
	}
	if got, want := line(rep), line(want); got != want {
		t.Fatalf("on s3: %s\non a local lake: %s", got, want)
	}
}

// localTwin plans and ingests g (shards of shardMax records) into a new
// local lake under dir, to compare an object store's results with; the lake
// is closed when the test ends.
func localTwin(t *testing.T, dir string, g genBatch, shardMax int) (*lake.Lake, *lake.Manifest) {
	t.Helper()
	local, err := lake.Open(context.Background(), filepath.Join(dir, "local"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	ldir := filepath.Join(dir, "l")
	if err := os.Mkdir(ldir, 0o755); err != nil {
		t.Fatal(err)
	}
	return local, planAndIngest(t, local, ldir, g, shardMax)
}

// s3Lake opens an empty s3:// lake served by gofakes3 on loopback, closed
// when the test ends.
func s3Lake(t *testing.T) *lake.Lake {
	t.Helper()
	return s3LakeWatched(t, nil)
}

// s3LakeWatched is s3Lake with its requests watched by w (nil: not
// watched).
func s3LakeWatched(t *testing.T, w *testrun.LakeWatch) *lake.Lake {
	t.Helper()
	return openS3Lake(t, s3LakeURL(t, w))
}

// s3LakeURL starts an S3 server on loopback, its requests watched by w (nil:
// not watched), and returns the URL of a lake in it.
func s3LakeURL(t *testing.T, w *testrun.LakeWatch) string {
	t.Helper()
	for k, v := range testrun.OfflineAWS() {
		t.Setenv(k, v)
	}
	faker := gofakes3.New(s3mem.New(), gofakes3.WithAutoBucket(true), gofakes3.WithLogger(gofakes3.DiscardLog()))
	var h http.Handler = faker.Server()
	if w != nil {
		h = w.Wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	q := url.Values{"region": {"us-east-1"}, "endpoint": {srv.URL}, "use_path_style": {"true"}, "disable_https": {"true"},
		"response_checksum_validation": {"when_required"}, "request_checksum_calculation": {"when_required"}}
	return fmt.Sprintf("s3://lake/prefix?%s", q.Encode())
}

// openS3Lake opens the lake at u (s3LakeURL), as a new process would.
func openS3Lake(t *testing.T, u string) *lake.Lake {
	t.Helper()
	l, err := lake.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if _, local := l.LocalDir(); local {
		t.Fatal("s3 lake opened as a local folder")
	}
	return l
}

// TestTamperedCacheIsRefetched: a remote lake's cached table file that no
// longer matches its digest is never read. Each cached table file in turn is
// overwritten with another valid Parquet file of the cache (the forgery
// DuckDB would read without complaint); the next session and the next
// reconcile see the lake's own rows, say so on stderr, and leave the cache
// holding the right bytes again.
func TestTamperedCacheIsRefetched(t *testing.T) {
	ctx := context.Background()
	l := s3Lake(t)
	dir := t.TempDir()
	g := generate(rand.New(rand.NewPCG(5, 5)), 60, 1, 1)
	m := planAndIngest(t, l, dir, g, 0)
	cache := filepath.Join(dir, "cache")
	eo := EngineOptions{Threads: 1, TempDir: dir, CacheDir: cache}
	rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: eo})
	if err != nil {
		t.Fatal(err)
	}
	const q = `SELECT (SELECT count(*) FROM costs) || '/' || (SELECT count(*) FROM attempts) || '/' ||
		(SELECT count(*) FROM expected) || '/' || (SELECT count(*) FROM outcomes) || '/' || (SELECT count(*) FROM quarantine)`
	counts := func() string {
		e, err := OpenSession(ctx, l, eo, Scope{})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		var s string
		if err := e.DB.QueryRowContext(ctx, q).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	want := counts()
	ents, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, en := range ents {
		if filepath.Ext(en.Name()) == ".parquet" {
			files = append(files, filepath.Join(cache, en.Name()))
		}
	}
	if len(files) < 3 {
		t.Fatalf("%d table files cached, want the costs, attempts, expected, outcomes and quarantine files", len(files))
	}
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	for i, victim := range files {
		forged, err := os.ReadFile(files[(i+1)%len(files)])
		if err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm()&0o222 != 0 {
			t.Errorf("cached %s is writable: %v %v", filepath.Base(victim), fi.Mode(), err)
		}
		// The forger replaces the file (cached files are read-only).
		os.Remove(victim)
		if err := os.WriteFile(victim, forged, 0o644); err != nil {
			t.Fatal(err)
		}
		logs.Reset()
		if got := counts(); got != want {
			t.Errorf("forged %s: the views count %s, the lake's files %s", filepath.Base(victim), got, want)
		}
		if !strings.Contains(logs.String(), "does not match its digest") || !strings.Contains(logs.String(), filepath.Base(victim)) {
			t.Errorf("forged %s: no warning on stderr: %q", filepath.Base(victim), logs.String())
		}
		d, _ := lake.ParseObjectKey(filepath.Base(victim))
		if got, _, err := lake.HashFile(victim); err != nil || got != d {
			t.Errorf("forged %s: the cache still holds %s (%v)", filepath.Base(victim), got, err)
		}
	}
	// A reconcile reads through the same cache: with an attempts file forged
	// it still reports the lake's lines (a new run: another --max-attempts).
	for _, f := range files {
		forged, _ := os.ReadFile(files[0])
		if f != files[0] {
			os.Remove(f)
			os.WriteFile(f, forged, 0o644)
		}
	}
	again, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: eo, MaxAttempts: 5})
	if err != nil {
		t.Fatal(err)
	}
	if again.Expected != rep.Expected || again.Succeeded != rep.Succeeded || again.Unknown != rep.Unknown || again.Duplicate != rep.Duplicate {
		t.Errorf("reconcile over a forged cache: %+v, first %+v", again, rep)
	}
	vr, err := lake.Verify(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if !vr.OK() {
		t.Fatalf("verify: %v", vr.Problems)
	}
}

// TestRetryShardsStoredSideBySide: on an object store a reconcile stores its
// full retry shards side by side, and they are the shards (the same bytes,
// so the same keys, in the same order) and lineage a local lake's
// reconcile of the same job writes.
func TestRetryShardsStoredSideBySide(t *testing.T) {
	ctx := context.Background()
	w := testrun.NewLakeWatch()
	l := s3LakeWatched(t, w)
	dir := t.TempDir()
	g := generate(rand.New(rand.NewPCG(9, 9)), 600, 1, 0)
	m := planAndIngest(t, l, dir, g, 20)
	w.Reset(http.MethodPut, "objects/", "")
	rep, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1, CacheDir: filepath.Join(dir, "cache")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.RetryShards) < 3 {
		t.Fatalf("%d retry shards, want 3 or more for this test", len(rep.RetryShards))
	}
	if !w.Overlapped() {
		t.Error("the retry shards were stored one after another")
	}
	local, lm := localTwin(t, dir, g, 20)
	want, err := Run(ctx, local, Options{JobKey: lm.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rep.RetryShards) != fmt.Sprint(want.RetryShards) || rep.RetryLineage != want.RetryLineage || rep.RetryLineage == "" {
		t.Errorf("on s3: shards %v, lineage %s\non a local lake: shards %v, lineage %s", rep.RetryShards, rep.RetryLineage, want.RetryShards, want.RetryLineage)
	}
}

// TestRetryReadsSideBySide: on an object store the retry reads its lines
// from many input shards at once (remoteRetryReads), whether it reads them
// ahead while the tables are written or after: eight shards' reads in
// flight together, where a local lake reads four, or as many as it has
// cores. The retry shards are a local lake's.
func TestRetryReadsSideBySide(t *testing.T) {
	ctx := context.Background()
	g := generate(rand.New(rand.NewPCG(9, 9)), 600, 1, 0)
	dir := t.TempDir()
	local, lm := localTwin(t, dir, g, 20)
	want, err := Run(ctx, local, Options{JobKey: lm.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name          string
		prefetchBytes int
	}{{"read ahead", 0}, {"read after the tables", -1}} {
		t.Run(c.name, func(t *testing.T) {
			w := testrun.NewLakeWatch()
			l := s3LakeWatched(t, w)
			dir := t.TempDir()
			m := planAndIngest(t, l, dir, g, 20)
			w.ResetN(http.MethodGet, "objects/", "", 8)
			o := Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1, CacheDir: filepath.Join(dir, "cache")}}
			o.retryPrefetchBytes = c.prefetchBytes
			// Read ahead, the retry waits for every line to be read, so
			// the reads seen are the read ahead's alone.
			o.retryPrefetchFinish = c.prefetchBytes >= 0
			var ahead atomic.Int64
			o.retryPrefetched = &ahead
			rep, err := Run(ctx, l, o)
			if err != nil {
				t.Fatal(err)
			}
			wantAhead := int64(rep.RetryRecords)
			if c.prefetchBytes < 0 {
				wantAhead = 0
			}
			if ahead.Load() != wantAhead {
				t.Errorf("%d lines read ahead, want %d", ahead.Load(), wantAhead)
			}
			if rep.RetryRecords == 0 || len(m.Shards) < 20 {
				t.Fatalf("%d records to retry in %d shards, want some in 20 or more for this test", rep.RetryRecords, len(m.Shards))
			}
			if !w.Overlapped() {
				t.Error("fewer than eight input shards were read at once")
			}
			if fmt.Sprint(rep.RetryShards) != fmt.Sprint(want.RetryShards) || rep.RetryLineage != want.RetryLineage {
				t.Errorf("on s3: shards %v, lineage %s\non a local lake: shards %v, lineage %s", rep.RetryShards, rep.RetryLineage, want.RetryShards, want.RetryLineage)
			}
		})
	}
}

// TestIngestStoresSideBySide: on an object store ingest stores a result
// file's attempts and quarantine tables while its raw archive uploads, and
// its marker after the three: the same records (the same table files) as a
// local lake's ingest of the same files.
func TestIngestStoresSideBySide(t *testing.T) {
	ctx := context.Background()
	w := testrun.NewLakeWatch()
	l := s3LakeWatched(t, w)
	dir := t.TempDir()
	g := generate(rand.New(rand.NewPCG(14, 14)), 80, 1, 0)
	g.output = append(g.output, "not json") // a quarantined line: a quarantine table too
	m := planGen(t, l, dir, g, 0, 0)
	job := mustDigest(m.JobKey)
	w.Reset(http.MethodPut, "", "")
	fr, err := ingest.IngestFile(ctx, l, m, ingest.FileOptions{Path: writeLines(t, dir, "output.jsonl", g.output), Channel: ingest.ChannelOutput, TmpDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !w.Overlapped() {
		t.Error("the raw file, its attempts and its quarantine were stored one after another")
	}
	onS3, err := l.IngestRecords(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	_, onDisk := ingestedLocally(t, dir, g, 0)
	if fr.Quarantined != 1 || len(onS3) != 1 || len(onDisk) != 1 || onS3[0].AttemptsFile == "" || onS3[0].QuarantineFile == "" ||
		onS3[0].AttemptsFile != onDisk[0].AttemptsFile || onS3[0].QuarantineFile != onDisk[0].QuarantineFile || onS3[0].Raw != onDisk[0].Raw {
		t.Errorf("on s3: %+v\non a local lake: %+v (%d quarantined)", onS3, onDisk, fr.Quarantined)
	}
}

// TestSplitTablesStoredSideBySide: on an object store a job's tables split
// by partition (sixteen files a table, a large result file's attempts too)
// are stored eight at a time, plan's
// expected files as ingest's attempts files, and they are a local lake's;
// a reconcile fetches them 32 at a time.
func TestSplitTablesStoredSideBySide(t *testing.T) {
	ctx := context.Background()
	w := testrun.NewLakeWatch()
	l := s3LakeWatched(t, w)
	dir := t.TempDir()
	g := generate(rand.New(rand.NewPCG(15, 15)), 400, 1, 0)
	w.ResetN(http.MethodPut, "tables/expected/", ".parquet", 8)
	m := planGen(t, l, dir, g, 0, 1)
	if !w.Overlapped() {
		t.Error("fewer than eight of plan's expected files were stored at once")
	}
	job := mustDigest(m.JobKey)
	w.ResetN(http.MethodPut, "tables/attempts/", ".parquet", 8)
	if _, err := ingest.IngestFile(ctx, l, m, ingest.FileOptions{Path: writeLines(t, dir, "output.jsonl", g.output), Channel: ingest.ChannelOutput, TmpDir: dir, SplitMinBytes: -1}); err != nil {
		t.Fatal(err)
	}
	if !w.Overlapped() {
		t.Error("fewer than eight of ingest's attempts files were stored at once")
	}
	onS3, err := l.IngestRecords(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	lm, onDisk := ingestedLocally(t, dir, g, 1)
	w.ResetN(http.MethodGet, "tables/", ".parquet", 24)
	if _, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1, CacheDir: filepath.Join(dir, "cache")}}); err != nil {
		t.Fatal(err)
	}
	if !w.Overlapped() {
		t.Error("fewer than 24 of the job's table files were fetched at once")
	}
	if lm.JobKey != m.JobKey || len(m.ExpectedFiles) != 16 || fmt.Sprint(m.ExpectedFiles) != fmt.Sprint(lm.ExpectedFiles) ||
		len(onS3) != 1 || len(onDisk) != 1 || len(onS3[0].AttemptsFiles) < 8 || fmt.Sprint(onS3[0].AttemptsFiles) != fmt.Sprint(onDisk[0].AttemptsFiles) {
		t.Errorf("on s3: expected %v, attempts %+v\non a local lake: expected %v, attempts %+v", m.ExpectedFiles, onS3, lm.ExpectedFiles, onDisk)
	}
}

// ingestedLocally plans g's input (split by partition from splitMin records
// on, 0 for the default) and ingests its output as one file (its attempts
// split as a large file's are) into a new local lake under dir, and returns the job's manifest and ingest records there.
func ingestedLocally(t *testing.T, dir string, g genBatch, splitMin int64) (*lake.Manifest, []lake.IngestRecord) {
	t.Helper()
	ctx := context.Background()
	local, err := lake.Open(ctx, filepath.Join(dir, "local"))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	m := planGen(t, local, dir, g, 0, splitMin)
	if _, err := ingest.IngestFile(ctx, local, m, ingest.FileOptions{Path: writeLines(t, dir, "output.jsonl", g.output), Channel: ingest.ChannelOutput, TmpDir: dir, SplitMinBytes: -1}); err != nil {
		t.Fatal(err)
	}
	recs, err := local.IngestRecords(ctx, mustDigest(m.JobKey))
	if err != nil {
		t.Fatal(err)
	}
	return m, recs
}

// TestTablesFetchedTogether: on an object store a reconcile fetches its
// tables' files all together, not a table at a time: a job of one expected
// file and one attempts file has the two fetched side by side.
func TestTablesFetchedTogether(t *testing.T) {
	ctx := context.Background()
	w := testrun.NewLakeWatch()
	l := s3LakeWatched(t, w)
	dir := t.TempDir()
	g := generate(rand.New(rand.NewPCG(10, 10)), 40, 0, 0)
	g.errors = nil
	m := planAndIngest(t, l, dir, g, 0)
	job, err := lake.ParseDigest(m.JobKey)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := l.IngestRecords(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	var attempts int
	for _, r := range recs {
		attempts += len(r.AttemptKeys())
	}
	if n := len(m.ExpectedTables()); n != 1 || attempts != 1 {
		t.Fatalf("%d expected files and %d attempts files, want one each for this test", n, attempts)
	}
	w.Reset(http.MethodGet, "tables/", ".parquet")
	if _, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1, CacheDir: filepath.Join(dir, "cache")}}); err != nil {
		t.Fatal(err)
	}
	if !w.Overlapped() {
		t.Error("the expected and attempts files were fetched one after another")
	}
}

// TestProbedAhead: on an object store, plan and reconcile start the check
// that the store refuses to overwrite (four round trips before the first
// ledger event) while they do their other work: plan's before it stores the
// manifest, reconcile's, in a process of its own, before it fetches the
// table files. One probe each, and none left behind. Which request arrives
// first is a race the probe's goroutine wins unless the machine starves it
// (it lost once under a loaded make test), so each order is asked of up to
// three fresh runs; started at the first ledger event instead, the probe
// would come after the manifest and the table files in every run.
func TestProbedAhead(t *testing.T) {
	ctx := context.Background()
	// first returns the place of the first request of method under folder.
	first := func(arrived []string, method, folder string) int {
		return slices.IndexFunc(arrived, func(a string) bool { return strings.HasPrefix(a, method+" /lake/"+folder) })
	}
	// ahead reports whether the probe's first create came before request
	// at, and checks that there were two creates.
	ahead := func(step string, arrived []string, at int) bool {
		t.Helper()
		var probes int
		for _, a := range arrived {
			if strings.HasPrefix(a, http.MethodPut+" /lake/"+lake.LedgerProbePrefix) {
				probes++
			}
		}
		if probes != 2 {
			t.Errorf("%s: %d creates of the probe, want 2", step, probes)
		}
		probe := first(arrived, http.MethodPut, lake.LedgerProbePrefix)
		return probe >= 0 && at >= 0 && probe < at
	}
	var planAhead, reconcileAhead bool
	for try := 0; try < 3 && !(planAhead && reconcileAhead); try++ {
		w := testrun.NewLakeWatch()
		u := s3LakeURL(t, w)
		dir := t.TempDir()
		g := generate(rand.New(rand.NewPCG(12, 12)), 60, 0, 0)

		w.Reset("", "", "")
		planned := openS3Lake(t, u)
		m := planAndIngest(t, planned, dir, g, 20)
		planned.Close()
		arrived := w.Arrived()
		planAhead = ahead("plan", arrived, first(arrived, http.MethodPut, "manifests/")) || planAhead

		w.Reset("", "", "")
		l := openS3Lake(t, u)
		if _, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1, CacheDir: filepath.Join(dir, "cache")}}); err != nil {
			t.Fatal(err)
		}
		l.Close()
		arrived = w.Arrived()
		reconcileAhead = ahead("reconcile", arrived, first(arrived, http.MethodGet, "tables/")) || reconcileAhead
		if keys, err := openS3Lake(t, u).List(ctx, lake.LedgerProbePrefix); err != nil || len(keys) != 0 {
			t.Errorf("probe keys left behind: %v (%v)", keys, err)
		}
	}
	if !planAhead {
		t.Error("plan: the probe's first create came after the manifest's store in three runs: want it started before")
	}
	if !reconcileAhead {
		t.Error("reconcile: the probe's first create came after the first table file's fetch in three runs: want it started before")
	}
}

// TestPlanListsEachLedgerOnce: a plan of a new job lists each shard's ledger
// once (a round trip each on an object store) before it appends the shard's
// CREATED and VALIDATED events, and planning it again lists each once more
// and appends nothing.
func TestPlanListsEachLedgerOnce(t *testing.T) {
	w := testrun.NewLakeWatch()
	l := s3LakeWatched(t, w)
	dir := t.TempDir()
	g := generate(rand.New(rand.NewPCG(13, 13)), 60, 0, 0)
	input := writeLines(t, dir, "input.jsonl", g.input)
	for _, again := range []bool{false, true} {
		w.Reset("", "", "")
		res, err := ingest.Plan(context.Background(), l, ingest.PlanOptions{Provider: "openai", Input: input,
			Tenant: "t1", PromptVersion: "p1", ShardMaxRecords: 20, TmpDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		_, puts, lists := w.Counts()
		wantPuts := 2 * len(res.Shards)
		if again {
			wantPuts = 0
		}
		if len(res.Shards) != 3 || lists != len(res.Shards) || puts != wantPuts {
			t.Errorf("plan (again: %v) of %d shards: %d ledger listings and %d events written, want %d and %d", again, len(res.Shards), lists, puts, len(res.Shards), wantPuts)
		}
	}
}

// TestPlanShardsStoredSideBySide: plan stores its shards into an object
// store several at a time, whether it wrote them while reading an input in
// key order or cut them after, and they are the shards (ids, objects,
// counts, in order) a local lake's plan of the same input has.
func TestPlanShardsStoredSideBySide(t *testing.T) {
	g := generate(rand.New(rand.NewPCG(11, 11)), 200, 0, 0)
	reversed := g
	reversed.input = slices.Clone(g.input)
	slices.Reverse(reversed.input)
	for name, g := range map[string]genBatch{"as generated": g, "reversed": reversed} {
		t.Run(name, func(t *testing.T) {
			w := testrun.NewLakeWatch()
			l := s3LakeWatched(t, w)
			dir := t.TempDir()
			w.Reset(http.MethodPut, "objects/", "")
			m := planAndIngest(t, l, dir, g, 20)
			if !w.Overlapped() {
				t.Error("the shards were stored one after another")
			}
			_, lm := localTwin(t, dir, g, 20)
			if len(m.Shards) != 10 || fmt.Sprint(m.Shards) != fmt.Sprint(lm.Shards) {
				t.Errorf("on s3: %v\non a local lake: %v", m.Shards, lm.Shards)
			}
		})
	}
}

// TestSessionOnS3ListsMarkersOnce: a session on an S3 lake lists its ingest
// records and ledgers once for every job (never a job's or a shard's on their
// own), reads more jobs' markers at once than on a local lake, and its views
// say what each job's own markers say; the reports its ledger events name are
// listed too, so a second session with the same marker cache reads no marker
// from the lake at all. A catalog of as many jobs lists the lake the same way.
func TestSessionOnS3ListsMarkersOnce(t *testing.T) {
	ctx := context.Background()
	w := testrun.NewLakeWatch()
	u := s3LakeURL(t, w)
	l := openS3Lake(t, u)
	dir := t.TempDir()
	var jobs []*lake.Manifest
	for seed := range uint64(listMarkersJobs) {
		g := generate(rand.New(rand.NewPCG(seed+20, 7)), 30+int(seed), 0, 0)
		if seed >= 3 { // planned only
			jobs = append(jobs, planGen(t, l, dir, g, 8, 0))
			continue
		}
		m := planAndIngest(t, l, dir, g, 8)
		if seed < 2 { // the third is planned and ingested only: no report
			if _, err := Run(ctx, l, Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 1, CacheDir: filepath.Join(dir, "cache")}}); err != nil {
				t.Fatal(err)
			}
		}
		jobs = append(jobs, m)
	}
	// What each job's own markers say, read job by job and shard by shard.
	wantEvents, wantLines := map[string]int64{}, map[string]int64{}
	g := lake.NewLedger(l, "")
	for _, m := range jobs {
		d, _ := lake.ParseDigest(m.JobKey)
		for _, sh := range m.Shards {
			evs, err := g.Events(ctx, d, sh.ShardID)
			if err != nil {
				t.Fatal(err)
			}
			wantEvents[m.JobKey] += int64(len(evs))
		}
		recs, err := l.IngestRecords(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			wantLines[m.JobKey] += r.Lines
		}
	}
	if len(wantEvents) != listMarkersJobs {
		t.Fatalf("%d jobs, want %d", len(wantEvents), listMarkersJobs)
	}
	session := func() (events, lines map[string]int64, reads int, overlapped bool) {
		t.Helper()
		nl := openS3Lake(t, u) // a new process, with the same marker cache
		nl.SetMarkerCache(filepath.Join(dir, "markers"))
		// More jobs' manifests in flight at once than a local lake reads.
		w.ResetN(http.MethodGet, "manifests/", ".json", markerReaders+1)
		e, err := OpenSession(ctx, nl, EngineOptions{Threads: 1, TempDir: dir, CacheDir: filepath.Join(dir, "cache")}, Scope{})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		for _, r := range w.Arrived() {
			if strings.HasPrefix(r, http.MethodGet+" ") && strings.HasSuffix(r, ".json") {
				reads++
			}
		}
		for _, p := range w.Listed() {
			// "ledger/" is an area; "ingests/<job>/" a job's, "ledger/<job>/<shard>/" a shard's.
			if strings.Count(p, "/") > 1 {
				t.Errorf("the session listed %q: a job's or a shard's markers on their own (all: %q)", p, w.Listed())
			}
		}
		events, lines = map[string]int64{}, map[string]int64{}
		for q, into := range map[string]map[string]int64{
			"SELECT job_key, count(*) FROM ledger GROUP BY ALL":   events,
			"SELECT job_key, count(*) FROM attempts GROUP BY ALL": lines,
		} {
			rows, err := e.DB.QueryContext(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var job string
				var n int64
				if err := rows.Scan(&job, &n); err != nil {
					t.Fatal(err)
				}
				into[job] = n
			}
			if err := rows.Close(); err != nil {
				t.Fatal(err)
			}
		}
		return events, lines, reads, w.Overlapped()
	}
	events, lines, reads, overlapped := session()
	if reads == 0 {
		t.Fatal("the first session read no marker from the lake")
	}
	if !overlapped {
		t.Errorf("the session never had %d jobs' manifests in flight at once", markerReaders+1)
	}
	if !maps.Equal(events, wantEvents) || !maps.Equal(lines, wantLines) {
		t.Fatalf("views: events %v, attempts %v; the jobs' own markers: %v and %v", events, lines, wantEvents, wantLines)
	}
	events, lines, reads, _ = session()
	if reads != 0 {
		t.Errorf("a second session with the markers cached read %d markers from the lake, want none", reads)
	}
	if !maps.Equal(events, wantEvents) || !maps.Equal(lines, wantLines) {
		t.Fatalf("second session's views: events %v, attempts %v; the jobs' own markers: %v and %v", events, lines, wantEvents, wantLines)
	}
	// A catalog has no compaction check: it lists the lake itself, as it
	// reads this many jobs.
	w.Reset("", "", "")
	if _, err := Catalog(ctx, openS3Lake(t, u), filepath.Join(dir, "lake.duckdb"), EngineOptions{Threads: 1, TempDir: dir, CacheDir: filepath.Join(dir, "cache")}, CatalogOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range w.Listed() {
		if strings.Count(p, "/") > 1 {
			t.Errorf("the catalog listed %q: a job's or a shard's markers on their own", p)
		}
	}
}
