package reconcile

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
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

// Scope limits the views to one tenant ("" for all).
type Scope struct{ Tenant string }

// Views creates the lake's views in the session (kind "TEMP VIEW") or in a
// catalog database (kind "VIEW"). It returns every local file the views read,
// so a read-only session can be limited to exactly those.
func (e *Engine) Views(ctx context.Context, scope Scope, kind string, smallDir string) ([]string, error) {
	l := e.lake
	if err := os.MkdirAll(smallDir, 0o755); err != nil {
		return nil, err
	}
	e.emptyDir = smallDir
	keys, err := l.List(ctx, lake.ManifestPrefix)
	if err != nil {
		return nil, err
	}
	var (
		expected, attempts, quarantine, outcomes, costs []string
		mrows                                           []manifestRow
		srows                                           []shardRow
		lrows                                           []ledgerRow
		frows                                           []reportFileRow
		irows                                           []ingestRow
		brows                                           []batchRow
	)
	g := lake.NewLedger(l, "")
	for _, k := range keys {
		d, ok := lake.ParseDigest(strings.TrimSuffix(strings.TrimPrefix(k, lake.ManifestPrefix), ".json"))
		if ok != nil {
			continue
		}
		m, err := l.GetManifest(ctx, d)
		if err != nil {
			return nil, err
		}
		if scope.Tenant != "" && m.Tenant != scope.Tenant {
			continue
		}
		mrows = append(mrows, manifestRow{m.JobKey, m.Tenant, m.Provider, m.Model, m.Endpoint, m.PromptVersion, m.SourceVersion,
			m.DatasetVersion, m.GenerationConfigHash, m.InputSHA256, m.ExpectedRecords, int32(m.Attempt), m.ParentJobKey,
			m.CreatedAt, m.SubmittedBy, m.CostCenter, m.Retention, m.OutputSchemaVersion, m.NotBefore,
			m.ParentProvider, m.ParentModel, m.OutputSchema})
		expected = append(expected, m.ExpectedFiles...)
		recs, err := l.IngestRecords(ctx, d)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.Channel == ingest.ChannelOutput || r.Channel == ingest.ChannelError {
				irows = append(irows, ingestRow{JobKey: m.JobKey, Tenant: m.Tenant, Channel: r.Channel, RawSHA256: r.Raw.Hex(),
					ProviderJobID: r.ProviderJobID, Lines: r.Lines, IngestedAt: r.IngestedAt})
			}
			if r.AttemptsFile != "" {
				attempts = append(attempts, r.AttemptsFile)
			}
			if r.QuarantineFile != "" {
				quarantine = append(quarantine, r.QuarantineFile)
			}
		}
		var reportKey string
		var reportAt time.Time
		reportKeys := map[string]bool{}
		for _, s := range m.Shards {
			evs, err := g.Events(ctx, d, s.ShardID)
			if err != nil {
				return nil, err
			}
			row := shardRow{JobKey: m.JobKey, Tenant: m.Tenant, ShardID: s.ShardID, FileSHA256: s.Object.Hex(), Records: s.Records, Bytes: s.Bytes}
			// One row per provider batch of the shard, in the order first seen.
			batchAt := map[string]int{}
			for _, ev := range evs {
				if id := ev.ProviderJobID; id != "" {
					i, ok := batchAt[id]
					if !ok {
						i = len(brows)
						batchAt[id] = i
						brows = append(brows, batchRow{JobKey: m.JobKey, Tenant: m.Tenant, ShardID: s.ShardID, ProviderJobID: id})
					}
					b := &brows[i]
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
				lrows = append(lrows, lr)
			}
			srows = append(srows, row)
		}
		// Every committed report of the job (the ledger names them), for the
		// time each raw file first counted.
		first := map[string]time.Time{}
		for k := range reportKeys {
			var r Report
			if err := l.GetJSON(ctx, k, lake.FormatReport, &r); err != nil {
				return nil, err
			}
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
			frows = append(frows, reportFileRow{JobKey: m.JobKey, Tenant: m.Tenant, RawSHA256: raw, FirstReconciledAt: first[raw]})
		}
		if reportKey != "" {
			var r Report
			if err := l.GetJSON(ctx, reportKey, lake.FormatReport, &r); err != nil {
				return nil, err
			}
			if r.OutcomesFile != "" {
				outcomes = append(outcomes, r.OutcomesFile)
			}
			if r.CostsFile != "" {
				costs = append(costs, r.CostsFile)
			}
		}
	}
	var all []string
	data := map[string]string{"Kind": kind}
	for _, t := range []struct {
		name  string
		files func() ([]string, error)
	}{
		{"Expected", func() ([]string, error) { return LocalFiles[lake.ExpectedRow](ctx, e, expected) }},
		{"Attempts", func() ([]string, error) { return LocalFiles[lake.AttemptRow](ctx, e, attempts) }},
		{"Quarantine", func() ([]string, error) { return LocalFiles[lake.QuarantineRow](ctx, e, quarantine) }},
		{"Outcomes", func() ([]string, error) { return LocalFiles[lake.OutcomeRow](ctx, e, outcomes) }},
		{"Costs", func() ([]string, error) { return LocalFiles[lake.CostRow](ctx, e, costs) }},
		{"Manifests", func() ([]string, error) { return smallTable(smallDir, "manifests", mrows) }},
		{"Shards", func() ([]string, error) { return smallTable(smallDir, "shards", srows) }},
		{"Ledger", func() ([]string, error) { return smallTable(smallDir, "ledger", lrows) }},
		{"ReportFiles", func() ([]string, error) { return smallTable(smallDir, "report_files", frows) }},
		{"Ingests", func() ([]string, error) { return smallTable(smallDir, "ingests", irows) }},
		{"Batches", func() ([]string, error) { return smallTable(smallDir, "batches", brows) }},
	} {
		paths, err := t.files()
		if err != nil {
			return nil, err
		}
		all = append(all, paths...)
		data[t.name] = "read_parquet(" + sqlList(paths) + ", union_by_name = true)"
	}
	if err := e.ExecFile(ctx, "views.sql", data); err != nil {
		return nil, err
	}
	sort.Strings(all)
	return all, nil
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
