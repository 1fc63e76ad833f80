package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

func init() { Register(geminiFormat{}) }

// geminiFormat is the Gemini API's batch mode: input file
// lines {key, request: GenerateContentRequest}, response-file lines
// {key, response: GenerateContentResponse} or {key, error: google.rpc.Status}.
//
// The model is in the batch's create URL, not in the line: ParseInput returns
// an empty Model (unless the request itself names one) and plan takes the
// model from PlanOptions.Model (--model), folding it into the model-config
// hash.
type geminiFormat struct{}

func (geminiFormat) Name() string            { return "gemini" }
func (geminiFormat) DefaultKeyField() string { return "key" }

// Limits: an input file is at most 2 GB (§4.1). No per-batch request count
// is documented; 100,000 keeps a shard's retry and blast radius like
// Anthropic's [M].
func (geminiFormat) Limits() (int, int64) { return 100_000, 2000 * 1000 * 1000 }

// geminiEndpoint is the method every request of a batch runs.
const geminiEndpoint = "generateContent"

// geminiContentFields are the per-record content of a GenerateContentRequest;
// systemInstruction, generationConfig, tools and safety settings are config.
var geminiContentFields = []string{"contents"}

func (geminiFormat) ParseInput(line []byte, keyField string) (InputRecord, *errkind.InputError) {
	f, ierr := topFields(line, "key", "request")
	if ierr != nil {
		return InputRecord{}, ierr
	}
	var rec InputRecord
	id, ierr := stringField(f[0], "key")
	if ierr != nil {
		if ierr.Msg == "missing" {
			ierr.Msg = "missing: batchlake needs every request to carry its own key to join its response"
		}
		return rec, ierr
	}
	if err := checkID(id); err != nil {
		return rec, &errkind.InputError{Field: "key", Msg: err.Error()}
	}
	rec.CustomID = id
	req, ierr := objectField(f[1], "request")
	if ierr != nil {
		return rec, ierr
	}
	var contents []json.RawMessage
	if err := json.Unmarshal(req["contents"], &contents); err != nil || len(contents) == 0 {
		return rec, &errkind.InputError{Field: "request.contents", Msg: "want a non-empty array"}
	}
	if raw, ok := req["model"]; ok {
		m, ierr := stringField(raw, "request.model")
		if ierr != nil {
			return rec, ierr
		}
		rec.Model = strings.TrimPrefix(m, "models/")
	}
	rec.Endpoint = geminiEndpoint
	cfg, err := canonicalWithout(req, geminiContentFields...)
	if err != nil {
		return rec, &errkind.InputError{Field: "request", Msg: err.Error()}
	}
	rec.ConfigHash = lake.HashFields(geminiEndpoint, string(cfg))
	if rec.RequestDigest, err = requestDigest(f[1], geminiEndpoint); err != nil {
		return rec, &errkind.InputError{Field: "request", Msg: err.Error()}
	}
	if rec.BusinessKey, ierr = businessKey(line, keyField, "key", id); ierr != nil {
		return rec, ierr
	}
	return rec, nil
}

func (geminiFormat) WithCustomID(line []byte, customID string) ([]byte, error) {
	return withTopField(line, "key", customID)
}

// geminiStatus is a google.rpc.Status; code is a gRPC canonical code, not an
// HTTP status (§4.2).
type geminiStatus struct {
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
	Status  string          `json:"status"`
}

type geminiResultLine struct {
	Key      json.RawMessage `json:"key"`
	Response json.RawMessage `json:"response"`
	Error    *geminiStatus   `json:"error"`
}

type geminiResponse struct {
	Candidates []struct {
		Content *struct {
			Parts []struct {
				Text         *string         `json:"text"`
				Thought      bool            `json:"thought"`
				FunctionCall json.RawMessage `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *struct {
		PromptTokenCount        int64 `json:"promptTokenCount"`
		CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
		CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
		ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
		ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
	ResponseID   string `json:"responseId"`
}

// GRPCCodeNames are the gRPC canonical code names by number (google.rpc.Code).
var GRPCCodeNames = [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
	"UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

func (geminiFormat) ParseResult(line []byte, channel string) (lake.AttemptRow, error) {
	var row lake.AttemptRow
	var in geminiResultLine
	if err := json.Unmarshal(line, &in); err != nil {
		return row, decodeError(err)
	}
	id, ierr := stringField(in.Key, "key")
	if ierr != nil {
		return row, fmt.Errorf("field key: %s", ierr.Msg)
	}
	row.CustomID = id
	switch {
	case in.Error != nil:
		row.Outcome = "error"
		geminiError(in.Error, &row)
	case len(in.Response) > 0 && string(in.Response) != "null":
		if err := parseGeminiResponse(in.Response, &row); err != nil {
			return row, fmt.Errorf("field response: %v", err)
		}
	default:
		return row, fmt.Errorf("neither response nor error is set")
	}
	return row, nil
}

// geminiError maps a google.rpc.Status to error columns: a gRPC code becomes
// its name in error_code with status_code left null; a code in the HTTP range
// (a REST-style error) becomes status_code, with the status name, if given,
// as error_code.
func geminiError(s *geminiStatus, row *lake.AttemptRow) {
	row.ErrorMessage = s.Message
	row.ErrorType = s.Status
	code := codeString(s.Code)
	n, err := strconv.ParseInt(code, 10, 32)
	switch {
	case code == "" && s.Status != "":
		row.ErrorCode = s.Status
	case code == "":
		// google.rpc.Status omits a zero code; an error line without one
		// says nothing of its cause.
		row.ErrorCode = GRPCCodeNames[2] // UNKNOWN
	case err == nil && n >= 0 && n < int64(len(GRPCCodeNames)):
		row.ErrorCode = GRPCCodeNames[n]
	case err == nil && n >= 100 && n <= 599:
		st := int32(n)
		row.StatusCode = &st
		row.ErrorCode = s.Status
	default:
		row.ErrorCode = code
	}
}

// parseGeminiResponse normalises a GenerateContentResponse into a success
// row. promptTokenCount already includes cached tokens (§4.2, §5.3), so
// input_tokens = promptTokenCount + toolUsePromptTokenCount (tool results
// fed back are billed as input) and cached_input_tokens =
// cachedContentTokenCount. Thinking tokens are billed as output:
// output_tokens = candidatesTokenCount + thoughtsTokenCount, of which
// reasoning_tokens = thoughtsTokenCount (as OpenAI counts reasoning inside
// completion tokens). A blocked prompt (promptFeedback.blockReason, no
// candidates) is a success line without output whose finish_reason is the
// block reason, so the quality gate fails it.
func parseGeminiResponse(raw json.RawMessage, row *lake.AttemptRow) error {
	var r geminiResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return decodeError(err)
	}
	row.Outcome = "success"
	row.ModelVersion = r.ModelVersion
	row.ProviderRequestID = r.ResponseID
	var text strings.Builder
	for i, c := range r.Candidates {
		if i == 0 {
			row.FinishReason = c.FinishReason
		}
		if c.Content == nil {
			continue
		}
		for _, p := range c.Content.Parts {
			call := len(p.FunctionCall) > 0 && string(p.FunctionCall) != "null"
			answer := p.Text != nil && *p.Text != "" && !p.Thought
			if i == 0 {
				if answer {
					text.WriteString(*p.Text)
				}
				if call {
					row.ToolCalls++
				}
			}
			row.HasOutput = row.HasOutput || answer || call
		}
	}
	if len(r.Candidates) == 0 && r.PromptFeedback != nil && r.PromptFeedback.BlockReason != "" {
		row.FinishReason = r.PromptFeedback.BlockReason
	}
	row.OutputText = text.String()
	if u := r.UsageMetadata; u != nil {
		in, err := addTokens(u.PromptTokenCount, u.ToolUsePromptTokenCount)
		if err != nil {
			return err
		}
		out, err := addTokens(u.CandidatesTokenCount, u.ThoughtsTokenCount)
		if err != nil {
			return err
		}
		row.InputTokens, row.CachedInputTokens = in, u.CachedContentTokenCount
		row.OutputTokens, row.ReasoningTokens = out, u.ThoughtsTokenCount
	}
	return checkUsage(row)
}

// GeminiBatchOutput is what a finished Gemini batch operation (GET
// /v1beta/batches/{id}) says about its results.
type GeminiBatchOutput struct {
	Name  string `json:"name"`
	State string `json:"state"` // metadata.state: BATCH_STATE_*
	Done  bool   `json:"done"`
	// Error is the operation's error message when the whole batch failed.
	Error string `json:"error,omitempty"`
	// ResponsesFile is the Files API name of the response file (file input).
	ResponsesFile string `json:"responses_file,omitempty"`
	// Lines are the inlined responses (inline input) rewritten as
	// response-file lines, {key, response} or {key, error}, in the order
	// given, for ingest to archive and parse like a downloaded file. An
	// inlined response without metadata.key gives a line without key, which
	// ingest quarantines.
	Lines []json.RawMessage `json:"lines,omitempty"`
}

type geminiOutputConfig struct {
	ResponsesFile    string `json:"responsesFile"`
	InlinedResponses *struct {
		InlinedResponses []struct {
			Metadata *struct {
				Key json.RawMessage `json:"key"`
			} `json:"metadata"`
			Response json.RawMessage `json:"response"`
			Error    json.RawMessage `json:"error"`
		} `json:"inlinedResponses"`
	} `json:"inlinedResponses"`
}

// ParseGeminiBatchOperation reads a batch operation's JSON: its state and
// either the response file's name or the inlined responses as result lines.
// The output is read from response, or from metadata.output where response
// lacks it.
func ParseGeminiBatchOperation(op []byte) (*GeminiBatchOutput, error) {
	var o struct {
		Name     string `json:"name"`
		Done     bool   `json:"done"`
		Metadata *struct {
			State  string              `json:"state"`
			Output *geminiOutputConfig `json:"output"`
		} `json:"metadata"`
		Response *geminiOutputConfig `json:"response"`
		Error    *geminiStatus       `json:"error"`
	}
	if err := json.Unmarshal(op, &o); err != nil {
		return nil, fmt.Errorf("gemini batch operation: %v", err)
	}
	res := &GeminiBatchOutput{Name: o.Name, Done: o.Done}
	if o.Error != nil {
		res.Error = o.Error.Message
		if res.Error == "" {
			res.Error = "code " + codeString(o.Error.Code)
		}
	}
	out := o.Response
	if o.Metadata != nil {
		res.State = o.Metadata.State
		if out == nil || (out.ResponsesFile == "" && out.InlinedResponses == nil) {
			if o.Metadata.Output != nil {
				out = o.Metadata.Output
			}
		}
	}
	if out == nil {
		return res, nil
	}
	res.ResponsesFile = out.ResponsesFile
	if out.InlinedResponses == nil {
		return res, nil
	}
	for i, ir := range out.InlinedResponses.InlinedResponses {
		var l struct {
			Key      json.RawMessage `json:"key,omitempty"`
			Response json.RawMessage `json:"response,omitempty"`
			Error    json.RawMessage `json:"error,omitempty"`
		}
		if ir.Metadata != nil && string(ir.Metadata.Key) != "null" {
			l.Key = ir.Metadata.Key
		}
		if string(ir.Response) != "null" {
			l.Response = ir.Response
		}
		if string(ir.Error) != "null" {
			l.Error = ir.Error
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(l); err != nil {
			return nil, fmt.Errorf("gemini batch operation: inlined response %d: %v", i+1, err)
		}
		res.Lines = append(res.Lines, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}))
	}
	return res, nil
}
