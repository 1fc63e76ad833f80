package ingest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

func init() { Register(anthropicFormat{}) }

// anthropicFormat is Anthropic's Message Batches format.
// The API takes one JSON body {"requests":[…]}; batchlake's input file holds
// one element of requests[] per line, {custom_id, params}, and the submitter
// wraps a shard's lines into the body. Results are one JSONL stream of
// {custom_id, result}.
type anthropicFormat struct{}

func (anthropicFormat) Name() string            { return "anthropic" }
func (anthropicFormat) DefaultKeyField() string { return "custom_id" }

// AnthropicMaxBytes is a shard's byte limit: the API's 256 MB body less room
// for the {"requests":[…]} wrapper and a comma per request (a shard counts a
// newline per line, so 1 MB of margin is generous).
const AnthropicMaxBytes = 255 * 1000 * 1000

// Limits: 100,000 requests or 256 MB per batch, whichever comes first (§2.1).
func (anthropicFormat) Limits() (int, int64) { return 100_000, AnthropicMaxBytes }

// anthropicEndpoint is the API a batch request is run against; it is part of
// the model-config hash.
const anthropicEndpoint = "/v1/messages"

// anthropicContentFields are the per-record content of Messages params. The
// system prompt is model configuration: changing it changes record ids, as
// OpenAI's Responses "instructions" do (a per-record system prompt simply
// gives each record its own config hash).
var anthropicContentFields = []string{"messages"}

// ValidAnthropicID reports whether id fits Anthropic's custom_id pattern
// ^[a-zA-Z0-9_-]{1,64}$ (§2.1).
func ValidAnthropicID(id string) bool {
	if len(id) < 1 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (anthropicFormat) ParseInput(line []byte, keyField string) (InputRecord, *errkind.InputError) {
	f, ierr := topFields(line, "custom_id", "params")
	if ierr != nil {
		return InputRecord{}, ierr
	}
	var rec InputRecord
	id, ierr := stringField(f[0], "custom_id")
	if ierr != nil {
		return rec, ierr
	}
	if !ValidAnthropicID(id) {
		return rec, &errkind.InputError{Field: "custom_id", Msg: fmt.Sprintf("%q does not match ^[a-zA-Z0-9_-]{1,64}$ (Anthropic allows only letters, digits, '_' and '-', at most 64)", abbrev([]byte(id)))}
	}
	rec.CustomID = id
	params, ierr := objectField(f[1], "params")
	if ierr != nil {
		return rec, ierr
	}
	if rec.Model, ierr = stringField(params["model"], "params.model"); ierr != nil {
		return rec, ierr
	}
	// Anthropic validates params only when the batch ends; refuse at plan
	// time what is certain to come back errored (§2.1).
	if raw, ok := params["max_tokens"]; !ok {
		return rec, &errkind.InputError{Field: "params.max_tokens", Msg: "missing"}
	} else if n, err := jsonInt(raw); err != nil || n < 1 {
		return rec, &errkind.InputError{Field: "params.max_tokens", Msg: "want an integer of at least 1, got " + abbrev(raw)}
	}
	if raw, ok := params["stream"]; ok && string(raw) != "null" {
		if stream, err := jsonBool(raw); err != nil || stream {
			return rec, &errkind.InputError{Field: "params.stream", Msg: "streaming is not allowed in a batch"}
		}
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(params["messages"], &msgs); err != nil || len(msgs) == 0 {
		return rec, &errkind.InputError{Field: "params.messages", Msg: "want a non-empty array"}
	}
	rec.Endpoint = anthropicEndpoint
	cfg, err := canonicalWithout(params, anthropicContentFields...)
	if err != nil {
		return rec, &errkind.InputError{Field: "params", Msg: err.Error()}
	}
	rec.ConfigHash = lake.HashFields(anthropicEndpoint, string(cfg))
	if rec.RequestDigest, err = requestDigest(f[1], "POST", anthropicEndpoint); err != nil {
		return rec, &errkind.InputError{Field: "params", Msg: err.Error()}
	}
	if rec.BusinessKey, ierr = businessKey(line, keyField, "custom_id", id); ierr != nil {
		return rec, ierr
	}
	return rec, nil
}

// jsonInt decodes an integer written without fraction or exponent.
func jsonInt(raw json.RawMessage) (int64, error) {
	var n int64
	err := json.Unmarshal(raw, &n)
	return n, err
}

func jsonBool(raw json.RawMessage) (bool, error) {
	var b bool
	err := json.Unmarshal(raw, &b)
	return b, err
}

func (anthropicFormat) WithCustomID(line []byte, customID string) ([]byte, error) {
	if !ValidAnthropicID(customID) {
		return nil, fmt.Errorf("custom_id %q does not fit Anthropic's ^[a-zA-Z0-9_-]{1,64}$", customID)
	}
	return withTopField(line, "custom_id", customID)
}

type anthropicResultLine struct {
	CustomID json.RawMessage  `json:"custom_id"`
	Result   *anthropicResult `json:"result"`
}

type anthropicResult struct {
	Type    string            `json:"type"`
	Message *anthropicMessage `json:"message"`
	Error   *anthropicError   `json:"error"`
}

// anthropicError is the errored result's ErrorResponse: the error type is
// nested twice, result.error.error.type (§2.2).
type anthropicError struct {
	Type      string                `json:"type"` // "error"
	Error     *anthropicErrorDetail `json:"error"`
	RequestID string                `json:"request_id"`
}

type anthropicErrorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// anthropicMessage is a Messages API response, as Anthropic returns it and as
// Bedrock's InvokeModel returns it for Claude models.
type anthropicMessage struct {
	ID         string             `json:"id"`
	Type       string             `json:"type"`
	Model      string             `json:"model"`
	StopReason string             `json:"stop_reason"`
	Content    []anthropicContent `json:"content"`
	Usage      *anthropicUsage    `json:"usage"`
}

type anthropicContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	// CacheCreation splits cache_creation_input_tokens by lifetime; a 1h
	// write is billed at twice the input price, a 5m write at 1.25 times.
	CacheCreation *anthropicCacheCreation `json:"cache_creation"`
	ServerToolUse *anthropicServerToolUse `json:"server_tool_use"`
}

type anthropicCacheCreation struct {
	Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
}

type anthropicServerToolUse struct {
	WebSearchRequests int64 `json:"web_search_requests"`
}

// fill normalises a message into a success row. Anthropic's input_tokens
// excludes cache reads and writes (§2.3, §5.3): input_tokens here is the
// total prompt, input + cache creation + cache read, with the cache read in
// cached_input_tokens and the cache creation in cache_write_tokens, so every
// provider's input_tokens means the same thing and cache writes can be
// priced. The writes' one-hour part (usage.cache_creation) is in
// cache_write_1h_tokens, and server-side web searches in
// web_search_requests.
func (m *anthropicMessage) fill(row *lake.AttemptRow) error {
	row.Outcome = "success"
	row.ModelVersion = m.Model
	row.FinishReason = m.StopReason
	var text strings.Builder
	for _, c := range m.Content {
		switch c.Type {
		case "text":
			text.WriteString(c.Text)
		case "tool_use":
			row.ToolCalls++
		}
	}
	row.OutputText = text.String()
	row.HasOutput = text.Len() > 0 || row.ToolCalls > 0
	if u := m.Usage; u != nil {
		in, err := addTokens(u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens)
		if err != nil {
			return err
		}
		row.InputTokens, row.CachedInputTokens, row.CacheWriteTokens = in, u.CacheReadInputTokens, u.CacheCreationInputTokens
		row.OutputTokens = u.OutputTokens
		if c := u.CacheCreation; c != nil {
			// The split must account for no more than the writes; what it
			// leaves out is priced as 5m writes, the default lifetime.
			split, err := addTokens(c.Ephemeral5m, c.Ephemeral1h)
			if err != nil {
				return err
			}
			if split > u.CacheCreationInputTokens {
				return fmt.Errorf("usage: cache_creation ephemeral_5m %d + ephemeral_1h %d tokens exceed cache_creation_input_tokens %d",
					c.Ephemeral5m, c.Ephemeral1h, u.CacheCreationInputTokens)
			}
			row.CacheWrite1hTokens = c.Ephemeral1h
		}
		if st := u.ServerToolUse; st != nil {
			row.WebSearchRequests = st.WebSearchRequests
		}
	}
	return checkUsage(row)
}

// ParseResult reads a line with the fast scanner where it can
// (fastAnthropicLine) and with encoding/json where it declines.
func (anthropicFormat) ParseResult(line []byte, channel string) (lake.AttemptRow, error) {
	var in anthropicResultLine
	if !fastAnthropicLine(line, &in) {
		in = anthropicResultLine{}
		if err := json.Unmarshal(line, &in); err != nil {
			return lake.AttemptRow{}, decodeError(err)
		}
	}
	return anthropicRow(&in)
}

// anthropicRow makes the attempt row of a decoded result line.
func anthropicRow(in *anthropicResultLine) (lake.AttemptRow, error) {
	var row lake.AttemptRow
	id, ierr := stringField(in.CustomID, "custom_id")
	if ierr != nil {
		return row, fmt.Errorf("field custom_id: %s", ierr.Msg)
	}
	row.CustomID = id
	r := in.Result
	if r == nil {
		return row, fmt.Errorf("field result: missing")
	}
	switch r.Type {
	case "succeeded":
		if r.Message == nil {
			return row, fmt.Errorf("field result.message: missing in a succeeded result")
		}
		row.ProviderRequestID = r.Message.ID
		if err := r.Message.fill(&row); err != nil {
			return row, fmt.Errorf("field result.message: %v", err)
		}
	case "errored":
		e := r.Error
		if e == nil || e.Error == nil || e.Error.Type == "" {
			return row, fmt.Errorf("field result.error.error.type: missing in an errored result")
		}
		row.Outcome = "error"
		row.ErrorCode, row.ErrorType, row.ErrorMessage = e.Error.Type, e.Error.Type, e.Error.Message
		row.ProviderRequestID = e.RequestID
	case "canceled", "expired":
		// Never run and not billed (§2.2); both are retryable by default.
		row.Outcome = "error"
		row.ErrorCode = r.Type
	case "":
		return row, fmt.Errorf("field result.type: missing")
	default:
		return row, fmt.Errorf("field result.type: unknown result type %q", abbrev([]byte(r.Type)))
	}
	return row, nil
}
