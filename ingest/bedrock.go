package ingest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

func init() { Register(bedrockFormat{}) }

// bedrockFormat is Amazon Bedrock batch inference (CreateModelInvocationJob): input lines {recordId, modelInput}, output lines
// {recordId, modelInput, modelOutput | error} in <input>.jsonl.out and a job
// summary in manifest.json.out.
//
// A Bedrock line names no model: the job does (modelId). ParseInput returns
// an empty Model and plan takes the model from PlanOptions.Model (--model),
// folding it into the model-config hash.
type bedrockFormat struct{}

func (bedrockFormat) Name() string            { return "bedrock" }
func (bedrockFormat) DefaultKeyField() string { return "recordId" }

// Limits are per-model Service Quotas (§3.1) that batchlake cannot read at
// plan time; these are conservative defaults (the commonly cited 50,000
// records and 1 GB per input file [M]). Lower them with --shard-max-records
// and --shard-max-bytes where an account's quotas are lower. Bedrock also has
// a per-job minimum record count: see BedrockMinRecords.
func (bedrockFormat) Limits() (int, int64) { return 50_000, 1000 * 1000 * 1000 }

// BedrockMinRecords is the default of Bedrock's per-model quota "Minimum
// number of records per batch inference job" (Service Quotas; some accounts
// and models show 1,000). Bedrock checks it while the job is Validating and
// fails a smaller job. plan --min-records overrides it.
const BedrockMinRecords = 100

// DefaultMinRecords is the fewest records a provider accepts in one batch
// job, 0 where it has no minimum.
func DefaultMinRecords(provider string) int {
	if provider == "bedrock" {
		return BedrockMinRecords
	}
	return 0
}

// The two kinds of modelInput, named as CreateModelInvocationJob's
// modelInvocationType; the kind is the record's endpoint.
const (
	BedrockInvokeModel = "InvokeModel"
	BedrockConverse    = "Converse"
)

// bedrockContentFields are the per-record content of a modelInput, across
// the Converse body and the model-native InvokeModel bodies (Anthropic
// messages, Titan inputText, Llama/Mistral prompt, Cohere texts). System
// prompts are configuration, as for Anthropic.
var bedrockContentFields = []string{"messages", "prompt", "inputText", "texts"}

// Keys only a Converse request body has.
var converseOnlyKeys = []string{"toolConfig", "additionalModelRequestFields", "additionalModelResponseFieldPaths",
	"guardrailConfig", "promptVariables", "requestMetadata", "performanceConfig"}

// Keys only model-native InvokeModel bodies have.
var invokeOnlyKeys = []string{"anthropic_version", "schemaVersion", "inputText", "prompt", "texts"}

// bedrockInvocationType tells a Converse body from an InvokeModel body by its
// shape: model-native markers first, then Converse-only keys, then Converse's
// untyped content blocks ({"text": …} rather than {"type":"text", …}).
func bedrockInvocationType(body map[string]json.RawMessage) string {
	for _, k := range invokeOnlyKeys {
		if _, ok := body[k]; ok {
			return BedrockInvokeModel
		}
	}
	for _, k := range converseOnlyKeys {
		if _, ok := body[k]; ok {
			return BedrockConverse
		}
	}
	var msgs []struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(body["messages"], &msgs) == nil && len(msgs) > 0 {
		var blocks []map[string]json.RawMessage
		if json.Unmarshal(msgs[0].Content, &blocks) == nil && len(blocks) > 0 {
			for _, b := range blocks {
				if _, typed := b["type"]; typed {
					return BedrockInvokeModel
				}
			}
			return BedrockConverse
		}
	}
	return BedrockInvokeModel
}

func (bedrockFormat) ParseInput(line []byte, keyField string) (InputRecord, *errkind.InputError) {
	f, ierr := topFields(line, "recordId", "modelInput")
	if ierr != nil {
		return InputRecord{}, ierr
	}
	var rec InputRecord
	id, ierr := stringField(f[0], "recordId")
	if ierr != nil {
		if ierr.Msg == "missing" {
			// Bedrock would invent one, and the result could then never be
			// joined to its record.
			ierr.Msg = "missing: batchlake needs every record to carry its own recordId"
		}
		return rec, ierr
	}
	if err := checkID(id); err != nil {
		return rec, &errkind.InputError{Field: "recordId", Msg: err.Error()}
	}
	rec.CustomID = id
	body, ierr := objectField(f[1], "modelInput")
	if ierr != nil {
		return rec, ierr
	}
	if _, ok := body["modelId"]; ok {
		return rec, &errkind.InputError{Field: "modelInput.modelId", Msg: "not allowed: the model is set once per job (plan --model); Bedrock rejects the record"}
	}
	rec.Endpoint = bedrockInvocationType(body)
	cfg, err := canonicalWithout(body, bedrockContentFields...)
	if err != nil {
		return rec, &errkind.InputError{Field: "modelInput", Msg: err.Error()}
	}
	rec.ConfigHash = lake.HashFields(rec.Endpoint, string(cfg))
	if rec.RequestDigest, err = requestDigest(f[1], rec.Endpoint); err != nil {
		return rec, &errkind.InputError{Field: "modelInput", Msg: err.Error()}
	}
	if rec.BusinessKey, ierr = businessKey(line, keyField, "recordId", id); ierr != nil {
		return rec, ierr
	}
	return rec, nil
}

func (bedrockFormat) WithCustomID(line []byte, customID string) ([]byte, error) {
	return withTopField(line, "recordId", customID)
}

// The echoed modelInput is not decoded: the raw file is archived as it is and
// the attempt row keeps none of it.
type bedrockResultLine struct {
	RecordID    json.RawMessage `json:"recordId"`
	ModelOutput json.RawMessage `json:"modelOutput"`
	Error       *struct {
		ErrorCode    json.RawMessage `json:"errorCode"`
		ErrorMessage string          `json:"errorMessage"`
	} `json:"error"`
}

func (bedrockFormat) ParseResult(line []byte, channel string) (lake.AttemptRow, error) {
	var row lake.AttemptRow
	var in bedrockResultLine
	if err := json.Unmarshal(line, &in); err != nil {
		return row, decodeError(err)
	}
	id, ierr := stringField(in.RecordID, "recordId")
	if ierr != nil {
		return row, fmt.Errorf("field recordId: %s", ierr.Msg)
	}
	row.CustomID = id
	hasOutput := len(in.ModelOutput) > 0 && string(in.ModelOutput) != "null"
	switch {
	case in.Error != nil:
		// An error replaces modelOutput (§3.2).
		row.Outcome = "error"
		row.ErrorMessage = in.Error.ErrorMessage
		if status, ok := httpStatus(in.Error.ErrorCode); ok {
			row.StatusCode = &status
		} else {
			row.ErrorCode = codeString(in.Error.ErrorCode)
		}
	case hasOutput:
		if err := parseBedrockOutput(in.ModelOutput, &row); err != nil {
			return row, fmt.Errorf("field modelOutput: %v", err)
		}
	default:
		return row, fmt.Errorf("neither modelOutput nor error is set")
	}
	return row, nil
}

// httpStatus reads an error code that is an HTTP status (100–599), written
// as a JSON number or a string of digits.
func httpStatus(raw json.RawMessage) (int32, bool) {
	s := codeString(raw)
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 100 || n > 599 {
		return 0, false
	}
	return int32(n), true
}

// bedrockOutput is the union of the modelOutput shapes batchlake reads:
// the Converse response (also Amazon Nova's InvokeModel response), Anthropic's
// Messages response, Titan text and embeddings, Llama and Mistral.
type bedrockOutput struct {
	// Anthropic (InvokeModel).
	Type string `json:"type"`
	// Converse and Nova.
	Output *struct {
		Message *struct {
			Content []struct {
				Text    *string         `json:"text"`
				ToolUse json.RawMessage `json:"toolUse"`
			} `json:"content"`
		} `json:"message"`
	} `json:"output"`
	StopReason string `json:"stopReason"`
	Usage      *struct {
		InputTokens           int64  `json:"inputTokens"`
		OutputTokens          int64  `json:"outputTokens"`
		TotalTokens           *int64 `json:"totalTokens"`
		CacheReadInputTokens  int64  `json:"cacheReadInputTokens"`
		CacheWriteInputTokens int64  `json:"cacheWriteInputTokens"`
		// The cache writes by lifetime (5m, 1h), which Claude bills at two
		// prices: part of cacheWriteInputTokens.
		CacheDetails []struct {
			TTL         string `json:"ttl"`
			InputTokens int64  `json:"inputTokens"`
		} `json:"cacheDetails"`
	} `json:"usage"`
	// Titan text and embeddings.
	InputTextTokenCount *int64 `json:"inputTextTokenCount"`
	Results             []struct {
		TokenCount       int64  `json:"tokenCount"`
		OutputText       string `json:"outputText"`
		CompletionReason string `json:"completionReason"`
	} `json:"results"`
	Embedding []json.RawMessage `json:"embedding"`
	// Meta Llama.
	Generation           *string `json:"generation"`
	PromptTokenCount     int64   `json:"prompt_token_count"`
	GenerationTokenCount int64   `json:"generation_token_count"`
	LlamaStopReason      string  `json:"stop_reason"`
	// Mistral.
	Outputs []struct {
		Text       string `json:"text"`
		StopReason string `json:"stop_reason"`
	} `json:"outputs"`
}

// parseBedrockOutput normalises a modelOutput into a success row. A shape it
// does not know is still a success (Bedrock ran the record and billed it) with
// has_output true and no usage, rather than a quarantined line that would be
// retried and paid for again.
func parseBedrockOutput(raw json.RawMessage, row *lake.AttemptRow) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil || probe == nil {
		return fmt.Errorf("want a JSON object, got %s", abbrev(raw))
	}
	if string(probe["type"]) == `"message"` {
		var m anthropicMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return decodeError(err)
		}
		row.ProviderRequestID = m.ID
		return m.fill(row)
	}
	var o bedrockOutput
	if err := json.Unmarshal(raw, &o); err != nil {
		return decodeError(err)
	}
	row.Outcome = "success"
	var text strings.Builder
	switch {
	case o.Output != nil:
		// Converse has no model field: model_version stays empty and ingest
		// fills in the job's model (§3.2).
		row.FinishReason = o.StopReason
		if m := o.Output.Message; m != nil {
			for _, c := range m.Content {
				if c.Text != nil {
					text.WriteString(*c.Text)
				}
				if len(c.ToolUse) > 0 && string(c.ToolUse) != "null" {
					row.ToolCalls++
				}
			}
		}
		if u := o.Usage; u != nil {
			if err := converseUsage(row, u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheWriteInputTokens, u.TotalTokens); err != nil {
				return err
			}
			var hour []int64
			for _, d := range u.CacheDetails {
				if d.TTL == "1h" {
					hour = append(hour, d.InputTokens)
				}
			}
			h, err := addTokens(hour...)
			if err != nil {
				return err
			}
			row.CacheWrite1hTokens = h
		}
	case len(o.Results) > 0 || o.InputTextTokenCount != nil:
		if len(o.Results) > 0 {
			text.WriteString(o.Results[0].OutputText)
			row.FinishReason = o.Results[0].CompletionReason
		}
		var outs []int64
		for _, r := range o.Results {
			outs = append(outs, r.TokenCount)
		}
		out, err := addTokens(outs...)
		if err != nil {
			return err
		}
		row.OutputTokens = out
		if o.InputTextTokenCount != nil {
			row.InputTokens = *o.InputTextTokenCount
		}
		if len(o.Embedding) > 0 {
			row.HasOutput = true
		}
	case o.Generation != nil:
		text.WriteString(*o.Generation)
		row.FinishReason = o.LlamaStopReason
		row.InputTokens, row.OutputTokens = o.PromptTokenCount, o.GenerationTokenCount
	case len(o.Outputs) > 0:
		text.WriteString(o.Outputs[0].Text)
		row.FinishReason = o.Outputs[0].StopReason
	default:
		row.HasOutput = len(probe) > 0
	}
	row.OutputText = text.String()
	row.HasOutput = row.HasOutput || text.Len() > 0 || row.ToolCalls > 0
	return checkUsage(row)
}

// converseUsage normalises Converse usage. AWS reports inputTokens without
// the cache reads and writes (as Anthropic does; AWS's docs leave it
// unsaid, real responses show totalTokens = input + output + cache read +
// cache write), so input_tokens = inputTokens + cacheRead + cacheWrite. When
// totalTokens says the other convention (total = input + output with cache
// counts present), inputTokens is taken as already including them.
func converseUsage(row *lake.AttemptRow, in, out, read, write int64, total *int64) error {
	sum, err := addTokens(in, read, write)
	if err != nil {
		return err
	}
	inclusive := total != nil && read+write > 0 && read+write <= in && *total == in+out
	if inclusive {
		sum = in
	}
	row.InputTokens, row.CachedInputTokens, row.CacheWriteTokens, row.OutputTokens = sum, read, write, out
	return nil
}

// BedrockManifest is a Bedrock job's manifest.json.out summary (§3.2). A
// count absent from the file is nil and not compared.
type BedrockManifest struct {
	TotalRecordCount     *int64 `json:"totalRecordCount"`
	ProcessedRecordCount *int64 `json:"processedRecordCount"`
	SuccessRecordCount   *int64 `json:"successRecordCount"`
	ErrorRecordCount     *int64 `json:"errorRecordCount"`
	InputTokenCount      *int64 `json:"inputTokenCount"`
	OutputTokenCount     *int64 `json:"outputTokenCount"`
}

// ParseBedrockManifest reads a manifest.json.out.
func ParseBedrockManifest(data []byte) (*BedrockManifest, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("bedrock manifest: want a JSON object")
	}
	var m BedrockManifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("bedrock manifest: %v", err)
	}
	for _, f := range m.fields() {
		if f.v != nil && *f.v < 0 {
			return nil, fmt.Errorf("bedrock manifest: field %s: negative count %d", f.name, *f.v)
		}
	}
	return &m, nil
}

type manifestField struct {
	name string
	v    *int64
}

func (m *BedrockManifest) fields() []manifestField {
	return []manifestField{{"totalRecordCount", m.TotalRecordCount}, {"processedRecordCount", m.ProcessedRecordCount},
		{"successRecordCount", m.SuccessRecordCount}, {"errorRecordCount", m.ErrorRecordCount},
		{"inputTokenCount", m.InputTokenCount}, {"outputTokenCount", m.OutputTokenCount}}
}

// BedrockTally is what the ingested result lines of one Bedrock job add up to.
type BedrockTally struct {
	// Expected is the number of records the job submitted (0: unknown, not compared).
	Expected          int64
	Success, Error    int64 // result lines by outcome
	InputTokens       int64 // normalised: including cache reads and writes
	CachedInputTokens int64
	CacheWriteTokens  int64
	OutputTokens      int64
}

// Add counts one ingested attempt row.
func (t *BedrockTally) Add(r lake.AttemptRow) {
	if r.Outcome == "success" {
		t.Success++
	} else {
		t.Error++
	}
	t.InputTokens += r.InputTokens
	t.CachedInputTokens += r.CachedInputTokens
	t.CacheWriteTokens += r.CacheWriteTokens
	t.OutputTokens += r.OutputTokens
}

// ManifestDifference is one count on which a Bedrock manifest and the
// ingested lines disagree.
type ManifestDifference struct {
	Field    string `json:"field"`
	Manifest int64  `json:"manifest"`
	Lines    int64  `json:"lines"`
	Note     string `json:"note,omitempty"`
}

func (d ManifestDifference) String() string {
	s := fmt.Sprintf("%s: manifest says %d, the result lines add up to %d", d.Field, d.Manifest, d.Lines)
	if d.Note != "" {
		s += " (" + d.Note + ")"
	}
	return s
}

// Check cross-checks the manifest against the ingested lines and returns
// every difference (none: they agree). Whether inputTokenCount includes cache
// reads and writes is not documented (§3.4), so it agrees when it equals the
// normalised input or the input without cache tokens.
func (m *BedrockManifest) Check(t BedrockTally) []ManifestDifference {
	var diffs []ManifestDifference
	cmp := func(field string, v *int64, lines int64, note string) {
		if v != nil && *v != lines {
			diffs = append(diffs, ManifestDifference{Field: field, Manifest: *v, Lines: lines, Note: note})
		}
	}
	if t.Expected > 0 {
		cmp("totalRecordCount", m.TotalRecordCount, t.Expected, "records the job submitted")
	}
	cmp("processedRecordCount", m.ProcessedRecordCount, t.Success+t.Error, "success and error lines")
	cmp("successRecordCount", m.SuccessRecordCount, t.Success, "")
	cmp("errorRecordCount", m.ErrorRecordCount, t.Error, "")
	if v := m.InputTokenCount; v != nil && *v != t.InputTokens && *v != t.InputTokens-t.CachedInputTokens-t.CacheWriteTokens {
		diffs = append(diffs, ManifestDifference{Field: "inputTokenCount", Manifest: *v, Lines: t.InputTokens,
			Note: fmt.Sprintf("lines count cache reads and writes; without them %d", t.InputTokens-t.CachedInputTokens-t.CacheWriteTokens)})
	}
	cmp("outputTokenCount", m.OutputTokenCount, t.OutputTokens, "")
	return diffs
}
