package lake

import (
	"context"
	"slices"
	"strings"
	"time"
)

// ManifestVersion is the version of the manifest body this code writes and reads.
const ManifestVersion = 1

// Manifest is the immutable description of one job: the commit marker of plan.
// It references the job's shard objects and expected table files, which are
// written before it.
type Manifest struct {
	Version              int             `json:"manifest_version"`
	JobKey               string          `json:"job_key"`
	Tenant               string          `json:"tenant"`
	Provider             string          `json:"provider"`
	Model                string          `json:"model"`
	Endpoint             string          `json:"endpoint"`
	PromptVersion        string          `json:"prompt_version"`
	SourceVersion        string          `json:"source_version"`
	DatasetVersion       string          `json:"dataset_version"`
	KeyField             string          `json:"key_field"`
	GenerationConfigHash string          `json:"generation_config_hash"`
	ModelConfigHashes    []string        `json:"model_config_hashes"`
	InputSHA256          string          `json:"input_sha256"`
	InputFileSHA256      string          `json:"input_file_sha256,omitempty"`
	InputFileName        string          `json:"input_file_name,omitempty"`
	ExpectedRecords      int64           `json:"expected_records"`
	Attempt              int             `json:"attempt"`
	ParentJobKey         string          `json:"parent_job_key,omitempty"`
	CreatedAt            time.Time       `json:"created_at"`
	SubmittedBy          string          `json:"submitted_by,omitempty"`
	CostCenter           string          `json:"cost_center,omitempty"`
	Retention            string          `json:"retention,omitempty"`
	OutputSchemaVersion  string          `json:"output_schema_version,omitempty"`
	ShardMaxRecords      int             `json:"shard_max_records"`
	ShardMaxBytes        int64           `json:"shard_max_bytes"`
	Shards               []ManifestShard `json:"shards"`
	// ExpectedFiles are the lake keys of the job's expected-table files.
	ExpectedFiles []string `json:"expected_files"`
	// ExpectedSplit, if set, says the expected table is split by partition
	// (Partition.Meets): ExpectedFiles[i] holds only the rows of bucket
	// ExpectedBuckets[i] of ExpectedSplit. A bucket without rows has no file.
	ExpectedSplit   int   `json:"expected_split,omitempty"`
	ExpectedBuckets []int `json:"expected_buckets,omitempty"`
	// NotBefore, if set, is the earliest time the job may be submitted (a
	// retry child's not-before window). It is not part of the job key: the
	// same records planned again are the same job, whenever they may go.
	NotBefore *time.Time `json:"not_before,omitempty"`
	// Estimate is plan's estimate of the job's tokens.
	Estimate *Estimate `json:"estimate,omitempty"`
	// MinRecords is the fewest records a shard may hold (the provider's
	// per-job minimum; 0 for none); plan balanced the shards to it.
	MinRecords int `json:"min_records,omitempty"`
	// BelowMin is "allow" when the job was planned below MinRecords on
	// purpose (an account whose quota is lower); its retry children are
	// then allowed too.
	BelowMin string `json:"below_min,omitempty"`
	// Held, if set, is why the job must not be submitted as a batch (a
	// retry child below MinRecords); submit refuses it.
	Held string `json:"held,omitempty"`
	// ParentProvider and ParentModel are the parent's provider and model
	// when this child's requests were translated to another provider or
	// model (retry --provider --model); empty for a child sent as its
	// parent was.
	ParentProvider string `json:"parent_provider,omitempty"`
	ParentModel    string `json:"parent_model,omitempty"`
	// Translated says the job's requests, or an ancestor's, were translated
	// from another format: its record ids come from its lineage, not from
	// its requests, and so do its retries'.
	Translated bool `json:"translated,omitempty"`
	// OutputSchema is the lake key of the output contract (a JSON Schema
	// object) every answer of the job must satisfy, "" for none: reconcile
	// checks it without being told (retry passes it on to the child).
	OutputSchema string `json:"output_schema,omitempty"`
	// BusinessKeys is the least and the greatest of the job's business
	// keys (byte order), nil for a job without records or one planned
	// before plan kept them. A record id hashes its business key, so jobs
	// of one tenant, source and prompt version whose ranges do not meet
	// hold no record id in common (verify checks the range against the
	// job's expected table).
	BusinessKeys *KeyRange `json:"business_keys,omitempty"`
}

// KeyRange is a closed range of business keys.
type KeyRange struct {
	First string `json:"first"`
	Last  string `json:"last"`
}

// Meets says whether r and o have a key in common (each range taken whole).
func (r KeyRange) Meets(o KeyRange) bool { return r.First <= o.Last && o.First <= r.Last }

// ManifestShard is one shard file of a job, stored content-addressed.
type ManifestShard struct {
	ShardID string `json:"shard_id"`
	Object  Digest `json:"file_sha256"`
	Records int64  `json:"records"`
	Bytes   int64  `json:"bytes"`
}

// ExpectedTables are the job's expected-table files, with their buckets.
func (m *Manifest) ExpectedTables() []TableFile {
	return tableFiles(m.ExpectedFiles, m.ExpectedBuckets, m.ExpectedSplit)
}

// ShardIDs lists the job's shards in the manifest's order.
func (m *Manifest) ShardIDs() []string {
	ids := make([]string, len(m.Shards))
	for i, s := range m.Shards {
		ids[i] = s.ShardID
	}
	return ids
}

// Shard returns the shard with the given id.
func (m *Manifest) Shard(id string) (ManifestShard, bool) {
	for _, s := range m.Shards {
		if s.ShardID == id {
			return s, true
		}
	}
	return ManifestShard{}, false
}

// GetManifest reads and verifies a job's manifest.
func (l *Lake) GetManifest(ctx context.Context, job Digest) (*Manifest, error) {
	var m Manifest
	if err := l.GetJSON(ctx, ManifestKey(job), FormatManifest, &m); err != nil {
		return nil, err
	}
	if m.Version != ManifestVersion {
		return nil, errUnknownVersion(ManifestKey(job), m.Version)
	}
	return &m, nil
}

// IngestRecord is the commit marker of one ingested provider file.
type IngestRecord struct {
	Version       int    `json:"ingest_version"`
	JobKey        string `json:"job_key"`
	Provider      string `json:"provider"`
	Channel       string `json:"channel"`
	Raw           Digest `json:"raw_sha256"`
	RawBytes      int64  `json:"raw_bytes"`
	FileName      string `json:"file_name"`
	ProviderJobID string `json:"provider_job_id,omitempty"`
	Lines         int64  `json:"lines"`
	Rows          int64  `json:"rows"`
	Quarantined   int64  `json:"quarantined"`
	AttemptsFile  string `json:"attempts_file,omitempty"`
	// AttemptsFiles (ingest_version 2) replace AttemptsFile when the
	// attempts table is split by partition, as the job's expected table is:
	// AttemptsFiles[i] holds only the rows of bucket AttemptsBuckets[i] of
	// AttemptsSplit.
	AttemptsFiles   []string  `json:"attempts_files,omitempty"`
	AttemptsSplit   int       `json:"attempts_split,omitempty"`
	AttemptsBuckets []int     `json:"attempts_buckets,omitempty"`
	QuarantineFile  string    `json:"quarantine_file,omitempty"`
	IngestedAt      time.Time `json:"ingested_at"`
	// Mode is "sync" for a file of answers from the real-time API (the
	// sync tail), priced without the batch multiplier; empty for a batch's.
	Mode string `json:"mode,omitempty"`
}

// IngestVersion is the version of an ingest record with one attempts file
// (AttemptsFile); IngestSplitVersion of one whose attempts table is split
// (AttemptsFiles), so that a batchlake that knows only version 1 refuses it
// rather than read no attempts. This code reads both.
const (
	IngestVersion      = 1
	IngestSplitVersion = 2
)

// knownIngestVersion says whether this code reads ingest records of version v.
func knownIngestVersion(v int) bool { return v == IngestVersion || v == IngestSplitVersion }

// AttemptTables are the record's attempts-table files, with their buckets.
func (r *IngestRecord) AttemptTables() []TableFile {
	if r.AttemptsFile != "" {
		return []TableFile{{Key: r.AttemptsFile}}
	}
	return tableFiles(r.AttemptsFiles, r.AttemptsBuckets, r.AttemptsSplit)
}

// AttemptKeys are the keys of the record's attempts-table files.
func (r *IngestRecord) AttemptKeys() []string {
	if r.AttemptsFile != "" {
		return []string{r.AttemptsFile}
	}
	return r.AttemptsFiles
}

// IngestRecords returns every ingest record of a job, in key order.
func (l *Lake) IngestRecords(ctx context.Context, job Digest) ([]IngestRecord, error) {
	keys, err := l.List(ctx, IngestPrefix(job))
	if err != nil {
		return nil, err
	}
	keys = slices.DeleteFunc(keys, func(k string) bool {
		return !strings.HasSuffix(k, ".json") // a concurrent write's temp file (fileblob)
	})
	return l.IngestRecordsAt(ctx, keys)
}

// IngestRecordsAt reads the ingest records at keys, a job's as a listing
// found them (MarkerKeys.IngestKeys).
func (l *Lake) IngestRecordsAt(ctx context.Context, keys []string) ([]IngestRecord, error) {
	// A job has a marker per result file (two a shard, collected): on a
	// remote lake each is a round trip, read LedgerFanout at a time.
	limit := LedgerFanout
	if _, local := l.LocalDir(); local {
		limit = 1
	}
	out := make([]IngestRecord, len(keys))
	err := EachOf(ctx, len(keys), limit, func(ctx context.Context, i int) error {
		if err := l.GetJSON(ctx, keys[i], FormatIngest, &out[i]); err != nil {
			return err
		}
		if !knownIngestVersion(out[i].Version) {
			return errUnknownVersion(keys[i], out[i].Version)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Estimate is plan's estimate of a job's tokens, so that spend committed but
// not yet billed is visible before the provider reports usage. It is an
// estimate: input tokens come from a per-record flag or the request's bytes
// divided by BytesPerToken; output tokens from each request's own output
// limit (max_tokens, max_completion_tokens, max_output_tokens, maxTokens,
// maxOutputTokens) or a per-record flag where a request names none.
// Reconcile prices it with the price table (report key "estimate").
type Estimate struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	// BytesPerToken is the divisor for input tokens (0 when the flag gave them).
	BytesPerToken int64 `json:"bytes_per_token,omitempty"`
	// InputPerRecord and OutputPerRecord are the flags' values (0: unset).
	InputPerRecord  int64 `json:"input_tokens_per_record,omitempty"`
	OutputPerRecord int64 `json:"output_tokens_per_record,omitempty"`
	// NoOutputLimit counts the requests that named no output limit (their
	// output is OutputPerRecord, or 0).
	NoOutputLimit int64 `json:"records_without_output_limit"`
}
