package lake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"gocloud.dev/blob"
)

// Severity says whether a verify problem breaks the lake or only deserves a look.
type Severity string

// The severities of a Problem.
const (
	// SeverityError: the lake does not hold what it promises (a corrupt or
	// missing object, a marker that does not verify, a broken ledger).
	SeverityError Severity = "error"
	// SeverityWarning: harmless but unexpected (an orphan table file, a
	// temporary file, a key outside the layout).
	SeverityWarning Severity = "warning"
)

// Problem is one thing Verify found wrong, at one key.
type Problem struct {
	Key      string   `json:"key"`
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
}

func (p Problem) String() string { return fmt.Sprintf("%s %s: %s", p.Severity, p.Key, p.Message) }

// Report is the result of Verify: what was checked and every problem found,
// sorted by key.
type Report struct {
	Objects      int       `json:"objects"`
	TableFiles   int       `json:"table_files"`
	Manifests    int       `json:"manifests"`
	Ingests      int       `json:"ingests"`
	Retractions  int       `json:"retractions"`
	Reports      int       `json:"reports"`
	LedgerEvents int       `json:"ledger_events"`
	Problems     []Problem `json:"problems"`
}

// Errors is the number of problems of severity error.
func (r Report) Errors() int { return r.count(SeverityError) }

// Warnings is the number of problems of severity warning.
func (r Report) Warnings() int { return r.count(SeverityWarning) }

// OK reports whether the lake verified without errors (warnings allowed).
func (r Report) OK() bool { return r.Errors() == 0 }

func (r Report) count(s Severity) int {
	n := 0
	for _, p := range r.Problems {
		if p.Severity == s {
			n++
		}
	}
	return n
}

// verifyWorkers is how many objects Verify hashes at once on a local lake
// (readersAtOnce on an object store).
const verifyWorkers = 4

// Verify walks the whole lake and reports every problem, not just the first:
//   - every content-addressed object and table file is re-hashed against its name;
//   - every sealed marker's envelope verifies and its version is known;
//   - each manifest's shard objects, expected files and output schema exist and verify;
//   - each ingest record's raw object and attempts/quarantine files exist and verify;
//   - each report's string fields named *_file, *_files, retry_shards and
//     retry_lineage that hold lake keys point at keys that exist and verify;
//   - each retraction marker names its job and raw file as its key does, and
//     the ingest records it retracts exist;
//   - each shard's ledger has sequence numbers 1..n without gaps and only
//     transitions CanTransition allows;
//   - each compaction marker verifies and the objects it names exist and verify;
//   - table files that no marker references are reported as orphan warnings.
//
// The error is for failures to read the lake at all (I/O, a cancelled
// context); problems found in the lake are in the Report.
func Verify(ctx context.Context, l *Lake) (Report, error) {
	v := &verifier{
		l:          l,
		keys:       map[string]bool{},
		content:    map[string]*contentCheck{},
		referenced: map[string]bool{},
		manifests:  map[Digest]*Manifest{},
	}
	steps := []func(context.Context) error{
		v.list, v.hashContent, v.checkManifests, v.checkIngests, v.checkRetractions, v.checkReports, v.checkPartitions, v.checkLedger, v.checkCompactions,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return Report{}, fmt.Errorf("verify %s: %w", redactURL(l.URL), err)
		}
	}
	v.checkOrphans()
	sort.SliceStable(v.rep.Problems, func(i, j int) bool {
		a, b := v.rep.Problems[i], v.rep.Problems[j]
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.Message < b.Message
	})
	if v.rep.Problems == nil {
		v.rep.Problems = []Problem{} // a clean lake's report says "problems": [], not null
	}
	return v.rep, nil
}

// contentCheck is what re-hashing one content-addressed key found.
type contentCheck struct {
	want  Digest
	table bool
	ok    bool
	size  int64
}

type verifier struct {
	l   *Lake
	rep Report
	// keys is every key listed.
	keys map[string]bool
	// content holds the content-addressed keys (objects and table files).
	content map[string]*contentCheck
	// referenced holds every key some marker points at.
	referenced map[string]bool
	// manifests holds the manifests that verified, by job.
	manifests map[Digest]*Manifest

	manifestKeys, ingestKeys, reportKeys, partitionKeys []string
	retractionKeys, compactionKeys                      []string
	ledgerKeys                                          []string

	// ahead, while a check runs, reads its markers ahead of it.
	ahead *readAhead
}

// readingAhead reads keys ahead of a check that opens them in this order;
// call the function it returns when the check is done.
func (v *verifier) readingAhead(ctx context.Context, keys []string) func() {
	v.ahead = v.l.newReadAhead(ctx, keys)
	return func() {
		v.ahead.stop()
		v.ahead = nil
	}
}

func (v *verifier) problem(key string, sev Severity, format string, args ...any) {
	v.rep.Problems = append(v.rep.Problems, Problem{Key: key, Severity: sev, Message: fmt.Sprintf(format, args...)})
}

// lakeAreas are the top-level folders of the layout (keys.go).
var lakeAreas = []string{"objects/", "tables/", "manifests/", "ingests/", "reports/", "ledger/", PartitionArea, RetractionArea, CompactionArea}

// list reads every key of the lake and sorts it into its kind.
func (v *verifier) list(ctx context.Context) error {
	top, err := v.listTop(ctx)
	if err != nil {
		return err
	}
	for _, k := range top {
		if k == SimStatePrefix || k == StagingPrefix || k == LedgerProbePrefix {
			continue // the built-in simulator's pretend server state; provider staging
		}
		if !slices.Contains(lakeAreas, k) {
			v.problem(k, SeverityWarning, "not part of the lake layout")
		}
	}
	for _, area := range lakeAreas {
		keys, err := v.listArea(ctx, area)
		if err != nil {
			return err
		}
		for _, k := range keys {
			v.keys[k] = true
			v.classify(k)
		}
	}
	return nil
}

func (v *verifier) listTop(ctx context.Context) ([]string, error) {
	var out []string
	it := v.l.Bucket.List(&blob.ListOptions{Delimiter: "/"})
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list: %w", err)
		}
		out = append(out, o.Key)
	}
}

// listArea lists one area, retrying a few times: a local folder's listing
// fails when a concurrent write's temp file vanishes while it is read.
func (v *verifier) listArea(ctx context.Context, prefix string) ([]string, error) {
	var err error
	for range 3 {
		var keys []string
		if keys, err = v.l.List(ctx, prefix); err == nil || ctx.Err() != nil {
			return keys, err
		}
	}
	return nil, err
}

func isTempKey(k string) bool {
	base := path.Base(k)
	return strings.HasPrefix(base, ".tmp-") || strings.HasSuffix(base, ".tmp")
}

func (v *verifier) classify(k string) {
	switch {
	case strings.HasPrefix(k, "objects/"):
		if d, ok := ParseObjectKey(k); ok && ObjectKey(d) == k {
			v.content[k] = &contentCheck{want: d}
			return
		}
	case strings.HasPrefix(k, "tables/"):
		if d, ok := parseTableFileKey(k); ok {
			v.content[k] = &contentCheck{want: d, table: true}
			return
		}
	case strings.HasPrefix(k, ManifestPrefix):
		if d, err := ParseDigest(strings.TrimSuffix(strings.TrimPrefix(k, ManifestPrefix), ".json")); err == nil && ManifestKey(d) == k {
			v.manifestKeys = append(v.manifestKeys, k)
			return
		}
	case strings.HasPrefix(k, "ingests/"):
		if _, ok := jobMarkerKey(k, "ingests/"); ok {
			v.ingestKeys = append(v.ingestKeys, k)
			return
		}
	case strings.HasPrefix(k, RetractionArea):
		if _, _, ok := ParseRetractionKey(k); ok {
			v.retractionKeys = append(v.retractionKeys, k)
			return
		}
	case strings.HasPrefix(k, "reports/"):
		if _, ok := jobMarkerKey(k, "reports/"); ok {
			v.reportKeys = append(v.reportKeys, k)
			return
		}
	case strings.HasPrefix(k, PartitionArea):
		if _, _, _, ok := ParsePartitionKey(k); ok {
			v.partitionKeys = append(v.partitionKeys, k)
			return
		}
	case strings.HasPrefix(k, CompactionArea):
		if _, ok := ParseCompactionKey(k); ok {
			v.compactionKeys = append(v.compactionKeys, k)
			return
		}
	case strings.HasPrefix(k, "ledger/"):
		if _, _, _, ok := ParseLedgerKey(k); ok {
			v.ledgerKeys = append(v.ledgerKeys, k)
			return
		}
		if _, _, ok := ParseBatchRecordKey(k); ok {
			return
		}
		if _, _, ok := ParseSyncKey(k); ok {
			return
		}
	}
	if isTempKey(k) {
		v.problem(k, SeverityWarning, "temporary file of an unfinished or concurrent write")
		return
	}
	v.problem(k, SeverityError, "key does not follow the lake layout")
}

// parseTableFileKey accepts exactly the keys TableFileKey builds.
func parseTableFileKey(k string) (Digest, bool) {
	parts := strings.Split(k, "/")
	if len(parts) != 5 || parts[0] != "tables" || !tableRe.MatchString(parts[1]) {
		return Digest{}, false
	}
	tenant, ok1 := strings.CutPrefix(parts[2], "tenant=")
	jobHex, ok2 := strings.CutPrefix(parts[3], "job=")
	if !ok1 || !ok2 || ValidTenant(tenant) != nil {
		return Digest{}, false
	}
	job, err := ParseDigest(jobHex)
	file, ok := ParseObjectKey(k)
	if err != nil || !ok || TableFileKey(parts[1], tenant, job, file) != k {
		return Digest{}, false
	}
	return file, true
}

// jobMarkerKey accepts <area><job hex>/<name>.json and returns the job.
func jobMarkerKey(k, area string) (Digest, bool) {
	parts := strings.Split(strings.TrimPrefix(k, area), "/")
	if len(parts) != 2 || !strings.HasSuffix(parts[1], ".json") || strings.HasPrefix(parts[1], ".") {
		return Digest{}, false
	}
	job, err := ParseDigest(parts[0])
	if err != nil || job.Hex() != parts[0] {
		return Digest{}, false
	}
	return job, true
}

// hashContent re-hashes every content-addressed key, a few at a time.
func (v *verifier) hashContent(ctx context.Context) error {
	keys := slices.Sorted(maps.Keys(v.content))
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		ioErrs []error
		next   = make(chan string)
	)
	workers := verifyWorkers
	if _, local := v.l.LocalDir(); !local {
		workers = v.l.readersAtOnce() // each read mostly waits
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				got, n, err := v.l.hashKey(ctx, k)
				mu.Lock()
				c := v.content[k]
				switch {
				case errors.Is(err, ErrNotFound):
					v.problem(k, SeverityError, "listed but gone when read")
				case err != nil:
					ioErrs = append(ioErrs, err)
				case got != c.want:
					v.problem(k, SeverityError, "content hashes to %s, not the digest in its name: corrupt", got)
				default:
					c.ok, c.size = true, n
				}
				mu.Unlock()
			}
		}()
	}
	for _, k := range keys {
		if v.content[k].table {
			v.rep.TableFiles++
		} else {
			v.rep.Objects++
		}
		next <- k
	}
	close(next)
	wg.Wait()
	return errors.Join(ioErrs...)
}

// checkRef records that from references key (as what) and reports a missing
// or corrupt target at from. It returns whether the target is sound.
func (v *verifier) checkRef(from, what, key string) bool {
	v.referenced[key] = true
	if !v.keys[key] {
		v.problem(from, SeverityError, "%s %s is missing", what, key)
		return false
	}
	if c, ok := v.content[key]; ok && !c.ok {
		v.problem(from, SeverityError, "%s %s is corrupt", what, key)
		return false
	}
	return true
}

// readMarker reads and opens a sealed marker. A marker that does not verify is
// a problem (false, nil); only I/O failures are errors.
func (v *verifier) readMarker(ctx context.Context, key, format string, out any) (bool, error) {
	data, err, ahead := v.ahead.get(key)
	if !ahead {
		data, err = v.l.readAll(ctx, key)
	}
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			v.problem(key, SeverityError, "listed but gone when read")
			return false, nil
		}
		return false, err
	}
	if err := OpenJSON(key, format, data, out); err != nil {
		v.problem(key, SeverityError, "marker does not verify: %s", strings.TrimPrefix(err.Error(), "lake read "+key+": "))
		return false, nil
	}
	return true, nil
}

func (v *verifier) checkManifests(ctx context.Context) error {
	defer v.readingAhead(ctx, v.manifestKeys)()
	var ranges []rangeCheck
	for _, k := range v.manifestKeys {
		v.rep.Manifests++
		var m Manifest
		ok, err := v.readMarker(ctx, k, FormatManifest, &m)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		job, _ := ParseDigest(strings.TrimSuffix(strings.TrimPrefix(k, ManifestPrefix), ".json"))
		if m.Version != ManifestVersion {
			v.problem(k, SeverityError, "manifest version %d is not one this batchlake knows", m.Version)
			continue
		}
		v.manifests[job] = &m
		if m.JobKey != job.Hex() {
			v.problem(k, SeverityError, "manifest body is for job %q, stored under job %s", m.JobKey, job.Hex())
		}
		if err := ValidTenant(m.Tenant); err != nil {
			v.problem(k, SeverityError, "%v", err)
		}
		var records int64
		seen := map[string]bool{}
		for _, s := range m.Shards {
			records += s.Records
			if err := ValidShardID(s.ShardID); err != nil || s.ShardID == JobShard {
				v.problem(k, SeverityError, "shard id %q is not valid", s.ShardID)
			}
			if seen[s.ShardID] {
				v.problem(k, SeverityError, "shard %s is listed twice", s.ShardID)
			}
			seen[s.ShardID] = true
			if s.Object.IsZero() {
				v.problem(k, SeverityError, "shard %s names no object", s.ShardID)
				continue
			}
			ok := v.checkRef(k, "shard "+s.ShardID+" object", ObjectKey(s.Object))
			if c := v.content[ObjectKey(s.Object)]; ok && c.size != s.Bytes {
				v.problem(k, SeverityError, "shard %s object has %d bytes, manifest says %d", s.ShardID, c.size, s.Bytes)
			}
		}
		if records != m.ExpectedRecords {
			v.problem(k, SeverityError, "shards hold %d records, manifest expects %d", records, m.ExpectedRecords)
		}
		if len(m.ExpectedFiles) == 0 && m.ExpectedRecords > 0 {
			v.problem(k, SeverityError, "manifest expects %d records but names no expected-table file", m.ExpectedRecords)
		}
		if msg := checkSplit("expected", m.ExpectedFiles, m.ExpectedBuckets, m.ExpectedSplit); msg != "" {
			v.problem(k, SeverityError, "manifest %s", msg)
		}
		for _, f := range m.ExpectedFiles {
			if !strings.HasPrefix(f, TablePrefix("expected")+"tenant="+m.Tenant+"/job="+job.Hex()+"/") {
				v.problem(k, SeverityError, "expected file %s is not an expected-table file of this job", f)
			}
			v.checkRef(k, "expected file", f)
		}
		if m.OutputSchema != "" {
			v.checkRef(k, "output schema", m.OutputSchema)
		}
		// (A job planned before plan kept the range has none: every job's
		// report reads it.)
		if m.BusinessKeys != nil {
			ranges = append(ranges, rangeCheck{k, &m})
		}
	}
	// The key ranges read the jobs' expected files, a few jobs' at once
	// (each file is read whole: a large job's are megabytes).
	found := make([][]string, len(ranges))
	err := EachOf(ctx, len(ranges), keyRangeReaders, func(ctx context.Context, i int) (err error) {
		found[i], err = v.checkKeyRange(ctx, ranges[i].m)
		return err
	})
	if err != nil {
		return err
	}
	for i, r := range ranges {
		for _, msg := range found[i] {
			v.problem(r.key, SeverityError, "%s", msg)
		}
	}
	return nil
}

// keyRangeReaders is how many jobs' expected files verify reads at once for
// their business-key ranges.
const keyRangeReaders = 8

// rangeCheck is a manifest whose business keys checkKeyRange checks.
type rangeCheck struct {
	key string
	m   *Manifest
}

// checkKeyRange checks a manifest's business_keys against its job's
// expected rows, and returns what is wrong: a job's report leaves out the
// jobs whose first attempt's range does not meet its own, so a range that
// left out a key would leave out a job that holds its record. Expected files
// that are missing or corrupt are reported by checkRef. It reads v.content
// only: several run at once.
func (v *verifier) checkKeyRange(ctx context.Context, m *Manifest) ([]string, error) {
	var (
		all  KeyRange
		rows int64
	)
	for _, f := range m.ExpectedFiles {
		c, ok := v.content[f]
		if !ok || !c.ok {
			return nil, nil
		}
		b, err := v.l.GetVerified(ctx, f, c.want)
		if err != nil {
			return nil, err
		}
		r, n, err := expectedKeyRange(f, b)
		if err != nil {
			return []string{err.Error()}, nil
		}
		if n > 0 {
			if rows == 0 || r.First < all.First {
				all.First = r.First
			}
			if rows == 0 || r.Last > all.Last {
				all.Last = r.Last
			}
			rows += n
		}
	}
	switch {
	case rows == 0:
		return []string{fmt.Sprintf("manifest gives business keys %q to %q, but its expected files hold no row", m.BusinessKeys.First, m.BusinessKeys.Last)}, nil
	case all != *m.BusinessKeys:
		return []string{fmt.Sprintf("manifest gives business keys %q to %q, its expected rows run from %q to %q", m.BusinessKeys.First, m.BusinessKeys.Last, all.First, all.Last)}, nil
	}
	return nil, nil
}

func (v *verifier) checkIngests(ctx context.Context) error {
	defer v.readingAhead(ctx, v.ingestKeys)()
	for _, k := range v.ingestKeys {
		v.rep.Ingests++
		var r IngestRecord
		ok, err := v.readMarker(ctx, k, FormatIngest, &r)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		job, _ := jobMarkerKey(k, "ingests/")
		if !knownIngestVersion(r.Version) {
			v.problem(k, SeverityError, "ingest record version %d is not one this batchlake knows", r.Version)
			continue
		}
		if r.JobKey != job.Hex() || r.Raw.IsZero() || IngestKey(job, r.Channel, r.Raw) != k {
			v.problem(k, SeverityError, "ingest record body (job %q, channel %q, raw %s) does not match its key", r.JobKey, r.Channel, r.Raw)
		}
		v.needManifest(k, job, "ingest record")
		if v.checkRef(k, "raw file", ObjectKey(r.Raw)) {
			if c := v.content[ObjectKey(r.Raw)]; c.size != r.RawBytes {
				v.problem(k, SeverityError, "raw file has %d bytes, ingest record says %d", c.size, r.RawBytes)
			}
		}
		tables := []struct {
			what, key, table string
			rows             int64
		}{
			{"attempts file", r.AttemptsFile, "attempts", r.Rows},
			{"quarantine file", r.QuarantineFile, "quarantine", r.Quarantined},
		}
		if split := len(r.AttemptsFiles) > 0 || r.AttemptsSplit != 0; split != (r.Version == IngestSplitVersion) || (split && r.AttemptsFile != "") {
			v.problem(k, SeverityError, "ingest record version %d names attempts_file %q and %d attempts_files: want one attempts_file in version %d, attempts_files in version %d",
				r.Version, r.AttemptsFile, len(r.AttemptsFiles), IngestVersion, IngestSplitVersion)
		} else if split {
			if msg := checkSplit("attempts", r.AttemptsFiles, r.AttemptsBuckets, r.AttemptsSplit); msg != "" {
				v.problem(k, SeverityError, "ingest record %s", msg)
			}
			tables = tables[1:]
			for _, f := range r.AttemptsFiles {
				tables = append(tables, struct {
					what, key, table string
					rows             int64
				}{"attempts file", f, "attempts", 0})
			}
		}
		for _, t := range tables {
			if t.key == "" {
				if t.rows > 0 {
					v.problem(k, SeverityError, "ingest record counts %d %s rows but names no %s", t.rows, t.table, t.what)
				}
				continue
			}
			if !strings.HasPrefix(t.key, TablePrefix(t.table)) || !strings.Contains(t.key, "/job="+job.Hex()+"/") {
				v.problem(k, SeverityError, "%s %s is not a %s-table file of this job", t.what, t.key, t.table)
			}
			v.checkRef(k, t.what, t.key)
		}
	}
	return nil
}

// checkRetractions checks each retraction marker: its body names the job and
// raw file its key does, and every ingest record it retracts exists (it is
// written after them).
func (v *verifier) checkRetractions(ctx context.Context) error {
	defer v.readingAhead(ctx, v.retractionKeys)()
	for _, k := range v.retractionKeys {
		v.rep.Retractions++
		var r Retraction
		ok, err := v.readMarker(ctx, k, FormatRetraction, &r)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		job, raw, _ := ParseRetractionKey(k)
		if r.Version != RetractionVersion {
			v.problem(k, SeverityError, "retraction version %d is not one this batchlake knows", r.Version)
			continue
		}
		if r.JobKey != job.Hex() || r.Raw != raw {
			v.problem(k, SeverityError, "retraction body (job %q, raw %s) does not match its key", r.JobKey, r.Raw)
		}
		v.needManifest(k, job, "retraction")
		if len(r.Ingests) == 0 {
			v.problem(k, SeverityError, "retraction names no ingest record")
		}
		for _, ik := range r.Ingests {
			if !strings.HasPrefix(ik, IngestPrefix(job)) || !strings.HasSuffix(ik, "-"+raw.Hex()+".json") {
				v.problem(k, SeverityError, "retracted ingest record %s is not one of raw file %s in this job", ik, raw.Hex())
				continue
			}
			if !v.keys[ik] {
				v.problem(k, SeverityError, "retracted ingest record %s is missing", ik)
			}
		}
	}
	return nil
}

// needManifest reports a marker of a job that has no manifest: every marker
// is written after its job's manifest.
func (v *verifier) needManifest(from string, job Digest, what string) {
	if !v.keys[ManifestKey(job)] {
		v.problem(from, SeverityError, "%s of job %s, which has no manifest", what, job.Hex())
	}
}

// isReportRefField reports whether a report field holds lake keys to check.
func isReportRefField(name string) bool {
	for _, suffix := range []string{"_file", "_files", "retry_shards", "retry_lineage"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

func looksLikeKey(s string) bool {
	for _, a := range lakeAreas {
		if strings.HasPrefix(s, a) && len(s) > len(a) {
			return true
		}
	}
	return false
}

func (v *verifier) checkReports(ctx context.Context) error {
	defer v.readingAhead(ctx, v.reportKeys)()
	for _, k := range v.reportKeys {
		v.rep.Reports++
		var body any
		ok, err := v.readMarker(ctx, k, FormatReport, &body)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		job, _ := jobMarkerKey(k, "reports/")
		v.needManifest(k, job, "report")
		if m, isObj := body.(map[string]any); isObj {
			if jk, isStr := m["job_key"].(string); isStr && jk != job.Hex() {
				v.problem(k, SeverityError, "report body is for job %q, stored under job %s", jk, job.Hex())
			}
			v.reportFiles(k, job, m["files"])
		}
		v.reportRefs(k, "", body)
	}
	return nil
}

// reportFiles checks that the ingest records and retractions a report's
// files name are in the lake: deleted, the next reconcile would count a
// retracted file again, or leave an ingested one out.
func (v *verifier) reportFiles(from string, job Digest, files any) {
	f, _ := files.(map[string]any)
	for _, c := range []struct{ field, channel string }{{"output", "output"}, {"error", "error"}, {"retracted", ""}} {
		list, _ := f[c.field].([]any)
		for _, x := range list {
			h, _ := x.(string)
			raw, err := ParseDigest(h)
			if err != nil {
				v.problem(from, SeverityError, "report files.%s holds %q, not a sha256", c.field, h)
				continue
			}
			key := RetractionKey(job, raw)
			if c.channel != "" {
				key = IngestKey(job, c.channel, raw)
			}
			v.checkRef(from, "files."+c.field, key)
		}
	}
}

// checkPartitions checks partition results (reconcile --partition) like
// reports: their job has a manifest, their body names the job, run and
// partition they are stored under, and the files they name verify.
func (v *verifier) checkPartitions(ctx context.Context) error {
	defer v.readingAhead(ctx, v.partitionKeys)()
	for _, k := range v.partitionKeys {
		var body any
		ok, err := v.readMarker(ctx, k, FormatPartition, &body)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		job, run, p, _ := ParsePartitionKey(k)
		v.needManifest(k, job, "partition result")
		m, _ := body.(map[string]any)
		if jk, _ := m["job_key"].(string); jk != job.Hex() {
			v.problem(k, SeverityError, "partition result body is for job %q, stored under job %s", jk, job.Hex())
		}
		if rk, _ := m["report"].(string); rk != ReportKey(job, run) {
			v.problem(k, SeverityError, "partition result body is for run %q, stored under run %s", rk, run.Hex())
		}
		if ps, _ := m["partition"].(string); ps != p.String() {
			v.problem(k, SeverityError, "partition result body is partition %q, stored as %s", ps, p)
		}
		v.reportRefs(k, "", body)
	}
	return nil
}

// reportRefs walks a report body (opaque JSON) and checks the lake keys held
// by fields named like references.
func (v *verifier) reportRefs(from, field string, x any) {
	switch x := x.(type) {
	case map[string]any:
		for _, name := range slices.Sorted(maps.Keys(x)) {
			v.reportRefs(from, name, x[name])
		}
	case []any:
		for _, e := range x {
			v.reportRefs(from, field, e)
		}
	case string:
		if isReportRefField(field) && looksLikeKey(x) {
			v.checkRef(from, field, x)
		}
	}
}

func (v *verifier) checkLedger(ctx context.Context) error {
	type shardKey struct {
		job   Digest
		shard string
	}
	groups := map[shardKey][]int{}
	var order []shardKey
	for _, k := range v.ledgerKeys {
		job, shard, seq, _ := ParseLedgerKey(k)
		sk := shardKey{job, shard}
		if _, ok := groups[sk]; !ok {
			order = append(order, sk)
		}
		groups[sk] = append(groups[sk], seq)
	}
	// (The listing's order is the order read: shards in turn, each's
	// events by their zero-padded sequence numbers.)
	defer v.readingAhead(ctx, v.ledgerKeys)()
	for _, sk := range order {
		seqs := groups[sk]
		slices.Sort(seqs)
		first := LedgerKey(sk.job, sk.shard, seqs[0])
		v.needManifest(first, sk.job, "ledger")
		if m := v.manifests[sk.job]; m != nil && sk.shard != JobShard {
			if _, ok := m.Shard(sk.shard); !ok {
				v.problem(first, SeverityError, "ledger of shard %s, which the manifest does not list", sk.shard)
			}
		}
		var prev State
		var bound string // the batch id of the last SUBMITTED
		known := true    // prev is the state before the next event
		want := 1
		for _, seq := range seqs {
			k := LedgerKey(sk.job, sk.shard, seq)
			v.rep.LedgerEvents++
			if seq > want {
				v.problem(LedgerKey(sk.job, sk.shard, want), SeverityError, "ledger gap: events %d..%d of shard %s are missing, %s follows", want, seq-1, sk.shard, path.Base(k))
				known = false
			}
			want = seq + 1
			var e Event
			ok, err := v.readMarker(ctx, k, FormatEvent, &e)
			if err != nil {
				return err
			}
			if !ok {
				known = false
				continue
			}
			if e.Seq != seq || e.JobKey != sk.job.Hex() || e.ShardID != sk.shard {
				v.problem(k, SeverityError, "event body says job %q shard %q seq %d, which is not where it is stored", e.JobKey, e.ShardID, e.Seq)
			}
			if known && !CanTransition(prev, e.State) {
				v.problem(k, SeverityError, "illegal transition %s -> %s", orNone(prev), e.State)
			}
			if e.State == Submitted && bound != "" && e.ProviderJobID != bound {
				// Written before SUBMITTED was the holder's alone: the shard
				// was bound to two paid batches.
				v.problem(k, SeverityWarning, "shard %s bound a second time: SUBMITTED %s after SUBMITTED %s (two paid batches; the first is a duplicate submission)", sk.shard, e.ProviderJobID, bound)
			}
			if e.State == Submitted {
				bound = e.ProviderJobID
			}
			prev, known = e.State, true
		}
	}
	return nil
}

// checkOrphans warns about table files no marker references: they are
// invisible to readers (an interrupted write, or a marker format this verify
// does not know).
func (v *verifier) checkOrphans() {
	for _, k := range slices.Sorted(maps.Keys(v.content)) {
		if v.content[k].table && !v.referenced[k] {
			v.problem(k, SeverityWarning, "orphan: no manifest, ingest record or report references this table file")
		}
	}
}
