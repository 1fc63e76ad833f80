package lake

// The Parquet tables of the lake, one tagged struct per table. Column names
// are the public contract (docs/contract.md); adding columns is fine, renaming is not.

// TableVersion is the version of the tables' format this code writes, named
// in every table file's created_by ("batchlake version 5") and in --version
// (FormatTables). Readers read every version (the views cast what differs):
//
//	1  cost_usd of outcomes and costs as exact decimal text (UTF8)
//	2  cost_usd as DECIMAL(38, 18) (Money)
//	3  the columns of 2; zstd entropy-codes the literals of every block, also
//	   of blocks it finds no matches in (the expected and costs tables, mostly
//	   hex digests, about 43 % smaller)
//	4  the columns of 2 and the literals of 3, zstd at its fastest level
//	   (on the pages of hex digests about 470 MB/s instead of 80, the same size)
//	5  as 4; the outcomes rows in the order of the job's expected files (the
//	   files in the manifest's order, each one's rows in turn) instead of
//	   record_id order, which reconcile no longer sorts them into
//	6  as 5; each expected row holds its line's byte offset in its shard
//	   (shard_offset), so a retry reads only its records' lines
//	7  as 6; the costs rows in the order of their records in the expected
//	   files (a record's lines in (raw file, line) order), then the lines of
//	   no record in (raw file, line) order, instead of all lines in (raw file,
//	   line) order: reconcile names each line's record from the expected files
//	   instead of carrying its strings through a sort; every table's page
//	   headers without min and max (the column index has them)
//	8  as 7; the integer columns DELTA_BINARY_PACKED instead of PLAIN (ingest
//	   and plan encode a few per cent faster, and the pages zstd is given are
//	   smaller)
//	9  as 8; the column of one value that is known only once the rows are
//	   written (the expected rows' job_key in a split table or one never
//	   split, every attempts file's raw_sha256) has its chunks after the row
//	   groups, the row groups' empty chunks of it unreferenced (fillColumn):
//	   plan writes the rows as it reads, ingest as it parses; job_key is the
//	   expected table's last column
//	10 as 9; the outcomes' row groups are the job's expected files' row
//	   groups, and their record columns (record_id, business_key,
//	   shard_id, custom_id, attempt, parent_job_key) those files' chunks,
//	   copied byte for byte (TableWriter.CopyColumns)
//	11 as 10; a page that ends in hex digits after a short header (record_id,
//	   request_sha256) is a zstd frame of Huffman-coded literals written by
//	   the codec itself (appendHexFrame) instead of by the zstd encoder: the
//	   same values and size, other bytes
//	12 as 11; every other page compressed by libzstd at level 1 instead of
//	   by the Go zstd encoder at its fastest level: the same values, about
//	   the same size, other bytes
const TableVersion = 12

// ExpectedRow is one record a job expects a result for.
type ExpectedRow struct {
	Tenant          string `parquet:"tenant,dict"`
	ShardID         string `parquet:"shard_id,dict"`
	ShardLine       int64  `parquet:"shard_line,delta"`
	RecordID        string `parquet:"record_id"`
	BusinessKey     string `parquet:"business_key"`
	CustomID        string `parquet:"custom_id"`
	Attempt         int32  `parquet:"attempt,delta"`
	ParentJobKey    string `parquet:"parent_job_key,dict"`
	ParentShardID   string `parquet:"parent_shard_id,dict"`
	RetryReason     string `parquet:"retry_reason,dict"`
	RequestSHA256   string `parquet:"request_sha256"`
	ModelConfigHash string `parquet:"model_config_hash,dict"`
	InputLine       int64  `parquet:"input_line,delta"`
	// Plan's estimate of the record's tokens (lake.Estimate).
	EstInputTokens  int64 `parquet:"est_input_tokens,delta"`
	EstOutputTokens int64 `parquet:"est_output_tokens,delta"`
	// ShardOffset is where the record's line starts in its shard, in bytes
	// (table format 6; NULL in older files).
	ShardOffset int64 `parquet:"shard_offset,delta"`
	// JobKey is the last column (table format 9 on): plan may fill it in
	// when the table is stored (TableWriter.FillLater), its chunks then
	// after the row groups, and readers that give a row group to a split by
	// where its first column starts (parquet-java, so Spark and Hive) need
	// that column in place.
	JobKey string `parquet:"job_key,dict"`
}

// AttemptRow is one result line ingested from a provider output or error file.
// record_id, shard_id and attempt are resolved through the job's expected rows
// by custom_id (the attempts view joins them); nothing joins by line number.
type AttemptRow struct {
	JobKey            string `parquet:"job_key,dict"`
	Tenant            string `parquet:"tenant,dict"`
	Provider          string `parquet:"provider,dict"`
	ProviderJobID     string `parquet:"provider_job_id,dict"`
	ProviderRequestID string `parquet:"provider_request_id"`
	CustomID          string `parquet:"custom_id"`
	Channel           string `parquet:"channel,dict"`
	RawSHA256         string `parquet:"raw_sha256,dict"`
	LineNo            int64  `parquet:"line_no,delta"`
	StatusCode        *int32 `parquet:"status_code,optional"`
	// Outcome is "success" (a 2xx result) or "error".
	Outcome           string `parquet:"outcome,dict"`
	ErrorCode         string `parquet:"error_code,dict"`
	ErrorType         string `parquet:"error_type,dict"`
	ErrorMessage      string `parquet:"error_message"`
	ModelVersion      string `parquet:"model_version,dict"`
	InputTokens       int64  `parquet:"input_tokens,delta"`
	CachedInputTokens int64  `parquet:"cached_input_tokens,delta"`
	CacheWriteTokens  int64  `parquet:"cache_write_tokens,delta"`
	OutputTokens      int64  `parquet:"output_tokens,delta"`
	ReasoningTokens   int64  `parquet:"reasoning_tokens,delta"`
	// CacheWrite1hTokens is the part of cache_write_tokens written with a one
	// hour lifetime (Anthropic's ephemeral_1h_input_tokens), priced apart.
	CacheWrite1hTokens int64 `parquet:"cache_write_1h_tokens,delta"`
	// WebSearchRequests counts server-side web searches (Anthropic's
	// server_tool_use.web_search_requests), billed per request.
	WebSearchRequests int64 `parquet:"web_search_requests,delta"`
	// FinishReason is the provider's finish/stop reason (stop, length,
	// max_output_tokens, tool_calls, content_filter, ...).
	FinishReason string `parquet:"finish_reason,dict"`
	// ResponseStatus is the body status where the endpoint has one (Responses API: completed, incomplete).
	ResponseStatus string `parquet:"response_status,dict"`
	// HasOutput is false when a 2xx body holds no usable output (default quality gate).
	HasOutput  bool   `parquet:"has_output"`
	OutputText string `parquet:"output_text"`
	ToolCalls  int32  `parquet:"tool_calls,delta"`
}

// QuarantineRow is an input line that could not be ingested, kept with its raw bytes.
type QuarantineRow struct {
	JobKey    string `parquet:"job_key,dict"`
	Tenant    string `parquet:"tenant,dict"`
	Channel   string `parquet:"channel,dict"`
	RawSHA256 string `parquet:"raw_sha256,dict"`
	LineNo    int64  `parquet:"line_no,delta"`
	Reason    string `parquet:"reason"`
	Raw       []byte `parquet:"raw"`
}

// OutcomeRow is a record's reconciled outcome in one job.
type OutcomeRow struct {
	JobKey       string `parquet:"job_key,dict"`
	Tenant       string `parquet:"tenant,dict"`
	RecordID     string `parquet:"record_id"`
	BusinessKey  string `parquet:"business_key"`
	ShardID      string `parquet:"shard_id,dict"`
	CustomID     string `parquet:"custom_id"`
	Attempt      int32  `parquet:"attempt,delta"`
	ParentJobKey string `parquet:"parent_job_key,dict"`
	Outcome      string `parquet:"outcome,dict"`
	Disposition  string `parquet:"disposition,dict"` // accepted, retry, manual
	Reason       string `parquet:"reason,dict"`
	Lines        int32  `parquet:"lines,delta"`
	CostUSD      Money  `parquet:"cost_usd,decimal(18:38)"` // table format 2; text in 1
	// Truncated says the record's best line was an answer cut at its token
	// limit (a quality failure with reason truncated, or a success under
	// --accept-truncated).
	Truncated bool `parquet:"truncated"`
}

// CostRow is one priced attempt line.
type CostRow struct {
	JobKey       string `parquet:"job_key,dict"`
	Tenant       string `parquet:"tenant,dict"`
	RecordID     string `parquet:"record_id"`
	CustomID     string `parquet:"custom_id"`
	Attempt      int32  `parquet:"attempt,delta"`
	Provider     string `parquet:"provider,dict"`
	ModelVersion string `parquet:"model_version,dict"`
	Category     string `parquet:"category,dict"`
	RawSHA256    string `parquet:"raw_sha256,dict"`
	LineNo       int64  `parquet:"line_no,delta"`
	PriceModel   string `parquet:"price_model,dict"`
	CostUSD      Money  `parquet:"cost_usd,decimal(18:38)"` // table format 2; text in 1
	// Unpriced: the line had tokens but the price table no row for its
	// model (or its token counts were out of range), so it cost 0.
	Unpriced bool `parquet:"unpriced"`
	// Mode is how the line's request was sent: batch, or sync (the
	// real-time API: retry --mode sync), priced without the batch multiplier.
	Mode string `parquet:"mode,dict"`
}
