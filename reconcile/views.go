package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/parquet-go/parquet-go"
	"golang.org/x/sync/errgroup"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
	lakesql "github.com/batchlake/batchlake/sql"
)

// Rows of the small tables built from the lake's JSON markers. Times keep
// microseconds, DuckDB's TIMESTAMPTZ precision, as a live catalog's views
// of the same markers do (catalog_sources.sql): milliseconds made ties of
// times that differ, and accepted orders by one.
type manifestRow struct {
	JobKey               string    `parquet:"job_key"`
	Tenant               string    `parquet:"tenant"`
	Provider             string    `parquet:"provider"`
	Model                string    `parquet:"model"`
	Endpoint             string    `parquet:"endpoint"`
	PromptVersion        string    `parquet:"prompt_version"`
	SourceVersion        string    `parquet:"source_version"`
	DatasetVersion       string    `parquet:"dataset_version"`
	GenerationConfigHash string    `parquet:"generation_config_hash"`
	InputSHA256          string    `parquet:"input_sha256"`
	ExpectedRecords      int64     `parquet:"expected_records"`
	Attempt              int32     `parquet:"attempt"`
	ParentJobKey         string    `parquet:"parent_job_key"`
	CreatedAt            time.Time `parquet:"created_at,timestamp(microsecond)"`
	SubmittedBy          string    `parquet:"submitted_by"`
	CostCenter           string    `parquet:"cost_center"`
	Retention            string    `parquet:"retention"`
	OutputSchemaVersion  string    `parquet:"output_schema_version"`
	// NotBefore: the earliest submit time of a retry child (NULL: none).
	NotBefore *time.Time `parquet:"not_before,timestamp(microsecond),optional"`
	// A child translated to another provider or model names its parent's
	// (empty otherwise); output_schema is the lake key of the job's output
	// contract (empty for none).
	ParentProvider string `parquet:"parent_provider"`
	ParentModel    string `parquet:"parent_model"`
	OutputSchema   string `parquet:"output_schema"`
}

type shardRow struct {
	JobKey        string `parquet:"job_key"`
	Tenant        string `parquet:"tenant"`
	ShardID       string `parquet:"shard_id"`
	FileSHA256    string `parquet:"file_sha256"`
	Records       int64  `parquet:"records"`
	Bytes         int64  `parquet:"bytes"`
	ProviderJobID string `parquet:"provider_job_id"`
	State         string `parquet:"state"`
}

// reportFileRow says when a raw file of a job was first reconciled: the
// reconciled_at of the earliest committed report of the job that lists it.
// The accepted view orders success lines by it, so a line that reaches a
// report later (a late duplicate) can never displace one accepted earlier.
type reportFileRow struct {
	JobKey            string    `parquet:"job_key"`
	Tenant            string    `parquet:"tenant"`
	RawSHA256         string    `parquet:"raw_sha256"`
	FirstReconciledAt time.Time `parquet:"first_reconciled_at,timestamp(microsecond)"`
}

// ingestRow is one ingest record: when a raw result file of a job was
// ingested. The attempts view takes each line's ingested_at from it.
type ingestRow struct {
	JobKey        string    `parquet:"job_key"`
	Tenant        string    `parquet:"tenant"`
	Channel       string    `parquet:"channel"`
	RawSHA256     string    `parquet:"raw_sha256"`
	ProviderJobID string    `parquet:"provider_job_id"`
	Lines         int64     `parquet:"lines"`
	IngestedAt    time.Time `parquet:"ingested_at,timestamp(microsecond)"`
}

// batchRow is one provider batch of a job: when batchlake first saw it
// terminal at the provider (the ledger event of status that recorded a
// terminal provider status; NULL while it is not). The attempts view takes
// each line's batch_completed_at from it.
type batchRow struct {
	JobKey         string     `parquet:"job_key"`
	Tenant         string     `parquet:"tenant"`
	ShardID        string     `parquet:"shard_id"`
	ProviderJobID  string     `parquet:"provider_job_id"`
	ProviderStatus string     `parquet:"provider_status"`
	CompletedAt    *time.Time `parquet:"completed_at,timestamp(microsecond),optional"`
}

type ledgerRow struct {
	JobKey        string    `parquet:"job_key"`
	Tenant        string    `parquet:"tenant"`
	ShardID       string    `parquet:"shard_id"`
	Seq           int64     `parquet:"seq"`
	State         string    `parquet:"state"`
	At            time.Time `parquet:"at,timestamp(microsecond)"`
	Actor         string    `parquet:"actor"`
	ProviderJobID string    `parquet:"provider_job_id"`
	LeaseExpires  string    `parquet:"lease_expires"`
	Detail        string    `parquet:"detail"`
}

// Scope limits the views to one tenant ("" for all), or to the jobs one
// job's records can be in, and, for a session opened to answer one query, to
// the views that query reads.
type Scope struct {
	Tenant string
	// Job, when set (a job key), is the job whose family (the job and its
	// retry descendants) the session asks about: the jobs read live are
	// only those that can hold one of its records (relatedJobs), and the
	// compaction's rows only those of its tenant.
	Job string
	// Query, when set, is the one query the session is for: only the
	// views it reads, and the views those read, are created, and only their
	// files are staged and verified (a query of costs reads no attempts).
	// A query that lists the catalog (SHOW TABLES, information_schema)
	// gets every view.
	Query string
	// Views, when not nil, names the views a session will read (a command
	// that runs its own SQL): those and the views they read are created.
	Views []string
}

// Views creates the lake's views in the session (kind "TEMP VIEW") or in a
// catalog database (kind "VIEW"). It returns every local file the views read,
// so a read-only session can be limited to exactly those. A session uses the
// lake's latest compaction (compact.go) for the jobs whose markers are
// unchanged since it, and reads every other job live.
func (e *Engine) Views(ctx context.Context, scope Scope, kind string, smallDir string) ([]string, error) {
	l := e.lake
	if err := os.MkdirAll(smallDir, 0o755); err != nil {
		return nil, err
	}
	e.emptyDir = smallDir
	var (
		comp   *compactionUse
		listed *lake.MarkerKeys
		all    []lake.Digest
	)
	eg, ectx := errgroup.WithContext(ctx)
	if kind == "TEMP VIEW" {
		eg.Go(func() (err error) {
			comp, listed, err = e.useCompaction(ectx, scope)
			return err
		})
	}
	eg.Go(func() (err error) {
		all, err = l.JobKeys(ectx)
		return err
	})
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	var ds []lake.Digest
	for _, d := range all {
		if !comp.covers(d.Hex()) {
			ds = append(ds, d)
		}
	}
	ms := newManifests(l)
	if scope.Job != "" {
		job, err := lake.ParseDigest(scope.Job)
		if err != nil {
			return nil, fmt.Errorf("views: job %q: %w", scope.Job, err)
		}
		var tenant string
		if ds, tenant, err = relatedJobs(ctx, ms, ds, job); err != nil {
			return nil, err
		}
		if comp != nil && comp.tenant == "" {
			comp.tenant = tenant
		}
	}
	if _, local := l.LocalDir(); listed == nil && !local && len(ds) >= listMarkersJobs {
		var err error
		if listed, err = l.ListMarkerKeys(ctx); err != nil {
			return nil, err
		}
	}
	src, _, err := readJobs(ctx, ms, ds, func(m *lake.Manifest) bool { return scope.Tenant == "" || m.Tenant == scope.Tenant }, listed)
	if err != nil {
		return nil, err
	}
	return e.createViews(ctx, kind, smallDir, src, comp, scope)
}

// listMarkersJobs is how many jobs a catalog's views read live from an
// object store before they list the lake's markers at once
// (lake.ListMarkerKeys) instead of each job's and shard's: a flat listing
// returns a thousand keys a request, and a job has a few markers a shard.
// (A session always has that listing: its compaction check makes it.)
const listMarkersJobs = 16

// viewSources are what the views read of the jobs read live: table files
// (lake keys) and the rows of the small tables built from markers.
type viewSources struct {
	expected, attempts, quarantine, outcomes, costs []string
	mrows                                           []manifestRow
	srows                                           []shardRow
	lrows                                           []ledgerRow
	frows                                           []reportFileRow
	irows                                           []ingestRow
	brows                                           []batchRow
}

// addJob reads one job's markers: its ingest records, every shard's ledger
// events and the reports they name; from listed's keys if set, else
// listing the job's and each shard's.
func (s *viewSources) addJob(ctx context.Context, l *lake.Lake, g *lake.Ledger, d lake.Digest, m *lake.Manifest, listed *lake.MarkerKeys) error {
	s.mrows = append(s.mrows, manifestRow{m.JobKey, m.Tenant, m.Provider, m.Model, m.Endpoint, m.PromptVersion, m.SourceVersion,
		m.DatasetVersion, m.GenerationConfigHash, m.InputSHA256, m.ExpectedRecords, int32(m.Attempt), m.ParentJobKey,
		m.CreatedAt, m.SubmittedBy, m.CostCenter, m.Retention, m.OutputSchemaVersion, m.NotBefore,
		m.ParentProvider, m.ParentModel, m.OutputSchema})
	s.expected = append(s.expected, m.ExpectedFiles...)
	var recs []lake.IngestRecord
	var err error
	if listed != nil {
		recs, err = l.IngestRecordsAt(ctx, listed.IngestKeys(d))
	} else {
		recs, err = l.IngestRecords(ctx, d)
	}
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.Channel == ingest.ChannelOutput || r.Channel == ingest.ChannelError {
			s.irows = append(s.irows, ingestRow{JobKey: m.JobKey, Tenant: m.Tenant, Channel: r.Channel, RawSHA256: r.Raw.Hex(),
				ProviderJobID: r.ProviderJobID, Lines: r.Lines, IngestedAt: r.IngestedAt})
		}
		s.attempts = append(s.attempts, r.AttemptKeys()...)
		if r.QuarantineFile != "" {
			s.quarantine = append(s.quarantine, r.QuarantineFile)
		}
	}
	var reportKey string
	var reportAt time.Time
	reportKeys := map[string]bool{}
	for _, sh := range m.Shards {
		var evs []lake.Event
		if listed != nil {
			evs, err = g.ListedEvents(ctx, d, sh.ShardID, listed.EventKeys(d, sh.ShardID))
		} else {
			evs, err = g.Events(ctx, d, sh.ShardID)
		}
		if err != nil {
			return err
		}
		row := shardRow{JobKey: m.JobKey, Tenant: m.Tenant, ShardID: sh.ShardID, FileSHA256: sh.Object.Hex(), Records: sh.Records, Bytes: sh.Bytes}
		// One row per provider batch of the shard, in the order first seen.
		batchAt := map[string]int{}
		for _, ev := range evs {
			if id := ev.ProviderJobID; id != "" {
				i, ok := batchAt[id]
				if !ok {
					i = len(s.brows)
					batchAt[id] = i
					s.brows = append(s.brows, batchRow{JobKey: m.JobKey, Tenant: m.Tenant, ShardID: sh.ShardID, ProviderJobID: id})
				}
				b := &s.brows[i]
				if st := ev.Detail[lake.DetailProviderStatus]; st != "" && b.CompletedAt == nil {
					b.ProviderStatus = st
					if lake.ProviderStatusTerminal(st) {
						at := ev.At
						b.CompletedAt = &at
					}
				}
			}
		}
		for _, ev := range evs {
			if ev.ProviderJobID != "" {
				row.ProviderJobID = ev.ProviderJobID
			}
			row.State = string(ev.State)
			if k := ev.Detail["report"]; k != "" {
				reportKeys[k] = true
				if !ev.At.Before(reportAt) {
					reportKey, reportAt = k, ev.At
				}
			}
			det, _ := json.Marshal(ev.Detail)
			lr := ledgerRow{JobKey: ev.JobKey, Tenant: m.Tenant, ShardID: ev.ShardID, Seq: int64(ev.Seq), State: string(ev.State), At: ev.At,
				Actor: ev.Actor, ProviderJobID: ev.ProviderJobID, Detail: string(det)}
			if ev.LeaseExpires != nil {
				lr.LeaseExpires = ev.LeaseExpires.Format(time.RFC3339Nano)
			}
			s.lrows = append(s.lrows, lr)
		}
		s.srows = append(s.srows, row)
	}
	// Every committed report of the job (the ledger names them), for the
	// time each raw file first counted.
	first := map[string]time.Time{}
	reports := map[string]*Report{}
	for k := range reportKeys {
		var r Report
		if err := l.GetJSON(ctx, k, lake.FormatReport, &r); err != nil {
			return err
		}
		reports[k] = &r
		for _, raw := range append(append([]string{}, r.Files.Output...), r.Files.Error...) {
			if t, ok := first[raw]; !ok || r.ReconciledAt.Before(t) {
				first[raw] = r.ReconciledAt
			}
		}
	}
	raws := make([]string, 0, len(first))
	for raw := range first {
		raws = append(raws, raw)
	}
	sort.Strings(raws)
	for _, raw := range raws {
		s.frows = append(s.frows, reportFileRow{JobKey: m.JobKey, Tenant: m.Tenant, RawSHA256: raw, FirstReconciledAt: first[raw]})
	}
	if r := reports[reportKey]; r != nil {
		if r.OutcomesFile != "" {
			s.outcomes = append(s.outcomes, r.OutcomesFile)
		}
		if r.CostsFile != "" {
			s.costs = append(s.costs, r.CostsFile)
		}
	}
	return nil
}

// viewTable is one source of the views: the local files of the jobs read
// live, and the empty file of its schema.
type viewTable struct {
	name  string // views.sql's name for it
	table string // the compaction's name for it
	files func() ([]string, error)
	empty func() (string, error)
}

func (e *Engine) viewTables(ctx context.Context, smallDir string, s *viewSources) []viewTable {
	return []viewTable{
		{"Expected", "expected", func() ([]string, error) { return LocalFiles[lake.ExpectedRow](ctx, e, s.expected) }, func() (string, error) { return emptyFile[lake.ExpectedRow](smallDir) }},
		{"Attempts", "attempts", func() ([]string, error) { return LocalFiles[lake.AttemptRow](ctx, e, s.attempts) }, func() (string, error) { return emptyFile[lake.AttemptRow](smallDir) }},
		{"Quarantine", "quarantine", func() ([]string, error) { return LocalFiles[lake.QuarantineRow](ctx, e, s.quarantine) }, func() (string, error) { return emptyFile[lake.QuarantineRow](smallDir) }},
		{"Outcomes", "outcomes", func() ([]string, error) { return LocalFiles[lake.OutcomeRow](ctx, e, s.outcomes) }, func() (string, error) { return emptyFile[lake.OutcomeRow](smallDir) }},
		{"Costs", "costs", func() ([]string, error) { return LocalFiles[lake.CostRow](ctx, e, s.costs) }, func() (string, error) { return emptyFile[lake.CostRow](smallDir) }},
		{"Manifests", "manifests", func() ([]string, error) { return smallTable(smallDir, "manifests", s.mrows) }, func() (string, error) { return emptySmall[manifestRow](smallDir, "manifests") }},
		{"Shards", "shards", func() ([]string, error) { return smallTable(smallDir, "shards", s.srows) }, func() (string, error) { return emptySmall[shardRow](smallDir, "shards") }},
		{"Ledger", "ledger", func() ([]string, error) { return smallTable(smallDir, "ledger", s.lrows) }, func() (string, error) { return emptySmall[ledgerRow](smallDir, "ledger") }},
		{"ReportFiles", "report_files", func() ([]string, error) { return smallTable(smallDir, "report_files", s.frows) }, func() (string, error) { return emptySmall[reportFileRow](smallDir, "report_files") }},
		{"Ingests", "ingests", func() ([]string, error) { return smallTable(smallDir, "ingests", s.irows) }, func() (string, error) { return emptySmall[ingestRow](smallDir, "ingests") }},
		{"Batches", "batches", func() ([]string, error) { return smallTable(smallDir, "batches", s.brows) }, func() (string, error) { return emptySmall[batchRow](smallDir, "batches") }},
	}
}

// createViews runs views.sql over the live sources, and the compaction's
// files for the jobs it covers: every view, or for a query (kind TEMP VIEW)
// those it reads.
func (e *Engine) createViews(ctx context.Context, kind, smallDir string, s *viewSources, comp *compactionUse, scope Scope) ([]string, error) {
	var all []string
	data := map[string]string{"Kind": kind}
	tables := e.viewTables(ctx, smallDir, s)
	need, err := e.viewsFor(ctx, kind, scope, tables)
	if err != nil {
		return nil, err
	}
	for _, t := range tables {
		if need != nil && !need.sources[t.name] {
			// No view created reads it: its statement is not run.
			data[t.name] = "(SELECT NULL)"
			continue
		}
		paths, err := t.files()
		if err != nil {
			return nil, err
		}
		all = append(all, paths...)
		if data[t.name], err = parquetScan(ctx, paths); err != nil {
			return nil, err
		}
		if comp != nil {
			expr, files, err := comp.source(ctx, e, t)
			if err != nil {
				return nil, err
			}
			all = append(all, files...)
			data[t.name] = "(SELECT * FROM " + data[t.name] + " UNION ALL BY NAME " + expr + ")"
		}
	}
	stmts, err := lakesql.Render("views.sql", data)
	if err != nil {
		return nil, err
	}
	if need != nil {
		kept := stmts[:0]
		for _, st := range stmts {
			if need.views[viewName(st)] {
				kept = append(kept, st)
			}
		}
		stmts = kept
	}
	if len(all) >= manyFiles {
		if err := e.ExecFile(ctx, "many_files.sql", nil); err != nil {
			return nil, err
		}
	}
	if err := e.Exec(ctx, "views.sql", stmts); err != nil {
		return nil, err
	}
	sort.Strings(all)
	return all, nil
}

// manyFiles is how many table files a session reads before it turns
// DuckDB's file caches off (many_files.sql); a variable for the tests.
var manyFiles = 1000

// viewSet is what a session for one query creates: the views, and the
// sources (views.sql's template fields) they read.
type viewSet struct {
	views, sources map[string]bool
}

// viewsFor is the set of views a session for a query, or for named
// views, needs; nil for every view (neither, a catalog, or a query whose
// tables cannot all be listed).
func (e *Engine) viewsFor(ctx context.Context, kind string, scope Scope, tables []viewTable) (*viewSet, error) {
	if kind != "TEMP VIEW" || (scope.Query == "" && scope.Views == nil) {
		return nil, nil
	}
	read := scope.Views
	if scope.Query != "" {
		var ok bool
		var err error
		if read, ok, err = e.queryTables(ctx, scope.Query); err != nil || !ok {
			return nil, err
		}
	}
	fields := make([]string, len(tables))
	for i, t := range tables {
		fields[i] = t.name
	}
	g, err := e.graph(ctx, fields)
	if err != nil {
		return nil, err
	}
	set := &viewSet{views: g.closure(read), sources: map[string]bool{}}
	for v := range set.views {
		for _, f := range g.sources[v] {
			set.sources[f] = true
		}
	}
	return set, nil
}

// smallTable writes rows built from markers as one Parquet file in dir.
func smallTable[T any](dir, name string, rows []T) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p := filepath.Join(dir, name+".parquet")
	if err := parquet.WriteFile(p, rows); err != nil {
		return nil, err
	}
	return []string{p}, nil
}

// emptySmall writes (once per folder) an empty file of a small table's schema.
func emptySmall[T any](dir, name string) (string, error) {
	p := filepath.Join(dir, name+"-empty.parquet")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	if err := parquet.WriteFile(p, []T{}); err != nil {
		return "", err
	}
	return p, nil
}
