package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

func init() { Register(openaiFormat{}) }

// openaiFormat is OpenAI's Batch API file format.
type openaiFormat struct{}

func (openaiFormat) Name() string            { return "openai" }
func (openaiFormat) DefaultKeyField() string { return "custom_id" }

// 50,000 requests and 200 MB per input file.
func (openaiFormat) Limits() (int, int64) { return 50_000, 200 * 1000 * 1000 }

var openaiEndpoints = map[string]bool{
	"/v1/responses": true, "/v1/chat/completions": true, "/v1/embeddings": true,
	"/v1/completions": true, "/v1/moderations": true, "/v1/images/generations": true,
	"/v1/images/edits": true, "/v1/videos": true,
}

// contentFields hold the per-record content of a request body; everything
// else in the body is model configuration.
var contentFields = []string{"messages", "input", "prompt", "contents"}

type openaiInputLine struct {
	CustomID json.RawMessage `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

const maxCustomIDBytes = 512

// ParseInput reads a line with the fast scanner where it can (fastParseInput)
// and with encoding/json where it declines (generalParseInput), whose
// records and errors are the reference the fast path is held to.
func (f openaiFormat) ParseInput(line []byte, keyField string) (InputRecord, *errkind.InputError) {
	if rec, ok := fastParseInput(line, keyField, nil); ok {
		return rec, nil
	}
	return generalParseInput(line, keyField)
}

// parseInputLater is ParseInput, leaving the request digest of a line the
// fast scanner reads to the caller (laterDigester).
func (f openaiFormat) parseInputLater(line []byte, keyField string) (InputRecord, lake.Call, *errkind.InputError) {
	var call lake.Call
	if rec, ok := fastParseInput(line, keyField, &call); ok {
		return rec, call, nil
	}
	rec, err := generalParseInput(line, keyField)
	return rec, lake.Call{}, err
}

var inputNames = []string{"custom_id", "method", "url", "body"}

// openaiConfig is a line's endpoint, model and model configuration (its
// canonical body without the content fields), with their hash.
type openaiConfig struct {
	endpoint, model string
	canonical       []byte
	hash            lake.Digest
	// limit is the output limit the configuration names (bodyOutputLimit).
	limit int32
	// members are the body's configuration members as the line that made
	// this configuration held them (keys and values as written, in the
	// line's order): a line whose members are the same bytes has the same
	// canonical form, without sorting and rendering it again.
	members [][2][]byte
}

// bodyMember is a member of a request body as its line holds it: key and
// value bytes and the value's flags, or fl contentMember for a content field.
type bodyMember struct {
	k, v []byte
	fl   jflags
}

const contentMember jflags = 0xff

// sameMembers says whether ms, a body's members in line order, are c's
// configuration members byte for byte.
func (c *openaiConfig) sameMembers(ms []bodyMember) bool {
	j := 0
	for _, m := range ms {
		if m.fl == contentMember {
			continue
		}
		if j >= len(c.members) || !bytes.Equal(c.members[j][0], m.k) || !bytes.Equal(c.members[j][1], m.v) {
			return false
		}
		j++
	}
	return j == len(c.members)
}

// lastOpenAIConfig is the configuration of the line parsed last: the lines
// of a file almost always share one, and this spares each of them hashing
// it and allocating its strings again.
var lastOpenAIConfig atomic.Pointer[openaiConfig]

// fastParseInput is ParseInput for well-formed lines without reflection or
// maps (see fastjson.go); ok is false when the line needs encoding/json's
// verdict, including every line ParseInput refuses. With later, the request
// digest is left to the caller: *later is the request, its body in line (or
// in a buffer of its own where the body had to be compacted).
func fastParseInput(line []byte, keyField string, later *lake.Call) (InputRecord, bool) {
	jm := newMemo(line)
	defer jm.release()
	var in inputParts
	if in.byShape(jm, line) {
		return in.finish(jm, line, keyField, later)
	}
	if !in.walk(jm, line) {
		return InputRecord{}, false
	}
	rec, ok := in.finish(jm, line, keyField, later)
	if ok {
		learnInputFrom(jm, line, keyField, rec)
	}
	return rec, ok
}

// inputParts are what an input line's record is made of, as read from the
// line: custom_id, method, url and body (v, their flags vf), the body's
// members in line order (ms: the content fields by key alone) and its model,
// and whether the body has white space between its tokens (bfl jSpace).
type inputParts struct {
	v     [4][]byte
	vf    [4]jflags
	ms    []bodyMember // in the line's memo (jmemo.members)
	model []byte
	bfl   jflags
}

// walk reads the parts of line with the scanner.
func (in *inputParts) walk(jm *jmemo, line []byte) bool {
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return false
	}
	v, vf := &in.v, &in.vf
	// body: an object; everything but its content fields is model
	// configuration. Its members are read as the line is scanned.
	ms := jm.members[:0]
	var model []byte
	var bfl jflags
	end, ok := walk(jval{line, i, 0}, inputNames, func(k int, field jval) (int, bool) {
		if k != 3 {
			var end int
			v[k], vf[k], end = field.scan()
			return end, end >= 0
		}
		if field.i >= len(line) || line[field.i] != '{' {
			return -1, false
		}
		end, ok := eachMember(jm, line, field.i, field.depth, func(key []byte, kfl jflags, val []byte, vfl jflags) bool {
			if kfl != 0 {
				return false
			}
			// White space inside a member's value counts too: the request
			// digest below is of the compacted body.
			bfl |= vfl & jSpace
			for _, m := range ms {
				if bytes.Equal(m.k, key) {
					return false
				}
			}
			for _, c := range contentFields {
				if string(key) == c {
					// Still remembered, to refuse a repeated key.
					ms = append(ms, bodyMember{k: key, fl: contentMember})
					return true
				}
			}
			if string(key) == "model" {
				model = val
			}
			ms = append(ms, bodyMember{key, val, vfl})
			return true
		}, &bfl)
		if ok {
			v[3] = line[field.i:end]
		}
		return end, ok
	})
	in.ms, in.model, in.bfl = ms, model, bfl
	return ok && skipSpace(line, end) == len(line) && v[3] != nil
}

// finish makes the record of a line's parts; ok is false where
// encoding/json must decide. With later, the request digest is left to the
// caller (see fastParseInput).
func (in *inputParts) finish(jm *jmemo, line []byte, keyField string, later *lake.Call) (rec InputRecord, ok bool) {
	v, vf, ms, model, bfl := &in.v, &in.vf, in.ms, in.model, in.bfl
	id, method, url, body := v[0], v[1], v[2], v[3]
	// custom_id: a plain string that checkID accepts.
	if len(id) < 3 || id[0] != '"' || vf[0]&(jEscape|jHigh) != 0 || len(id)-2 > maxCustomIDBytes {
		return rec, false
	}
	for _, c := range id[1 : len(id)-1] {
		if c < 0x20 || c == 0x7f {
			return rec, false
		}
	}
	if string(method) != `"POST"` || len(url) < 2 || url[0] != '"' || vf[2]&(jEscape|jHigh) != 0 {
		return rec, false
	}
	u := url[1 : len(url)-1]
	if !openaiEndpoints[string(u)] {
		return rec, false
	}
	if len(model) < 3 || model[0] != '"' {
		return rec, false
	}
	if vf[0]&jHigh != 0 {
		return rec, false
	}
	rec.CustomID = jm.str(id[1 : len(id)-1])
	c := lastOpenAIConfig.Load()
	if c == nil || c.endpoint != string(u) || !c.sameMembers(ms) {
		if c, ok = newOpenAIConfig(jm, c, string(u), model, ms); !ok {
			return rec, false
		}
		lastOpenAIConfig.Store(c)
	}
	rec.Endpoint, rec.Model, rec.ConfigHash = c.endpoint, c.model, c.hash
	rec.limit, rec.limitSet = c.limit, true
	compact := body
	if bfl&jSpace != 0 {
		compact = compactAppend(make([]byte, 0, len(body)), body)
	}
	if later != nil {
		*later = lake.Call{Method: "POST", URL: c.endpoint, Body: compact}
	} else {
		rec.RequestDigest = lake.HashCall("POST", c.endpoint, compact)
	}
	if keyField == "" || keyField == "custom_id" {
		rec.BusinessKey = rec.CustomID
	} else {
		k, ierr := lookupKey(line, keyField)
		if ierr != nil {
			return rec, false
		}
		rec.BusinessKey = k
	}
	return rec, true
}

// newOpenAIConfig renders the canonical form of a body's configuration
// members (all but the content fields of all, in line order) and hashes it
// with the endpoint, unless prev has the same canonical form; ok is false
// where encoding/json must decide (a key or string with an escape or a
// non-ASCII byte, a repeated key).
func newOpenAIConfig(jm *jmemo, prev *openaiConfig, endpoint string, model []byte, all []bodyMember) (c *openaiConfig, ok bool) {
	var cfg [16]bodyMember
	ms := cfg[:0]
	for _, m := range all {
		if m.fl == contentMember {
			continue
		}
		if m.fl&(jEscape|jHigh) != 0 {
			return nil, false
		}
		ms = append(ms, m)
	}
	c = &openaiConfig{endpoint: endpoint, model: string(model[1 : len(model)-1]), members: make([][2][]byte, len(ms))}
	for i, m := range ms {
		c.members[i] = [2][]byte{bytes.Clone(m.k), bytes.Clone(m.v)}
	}
	// The output limit is a configuration member (the body's own, and no
	// content field), so it is the same for every line of the configuration.
	c.limit = bodyOutputLimit(func(key string) ([]byte, bool) {
		for _, m := range c.members {
			if string(m[0]) == key {
				return m[1], true
			}
		}
		return nil, false
	})
	slices.SortFunc(ms, func(a, b bodyMember) int { return bytes.Compare(a.k, b.k) })
	buf := append(jm.scratch[:0], '{')
	defer func() { jm.scratch = buf[:0] }() // kept by the memo: buf is copied where it is kept
	for i, m := range ms {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, '"')
		buf = append(buf, m.k...)
		buf = append(buf, '"', ':')
		if buf, ok = canonicalAppend(jm, buf, m.v); !ok {
			return nil, false
		}
	}
	buf = append(buf, '}')
	if prev != nil && prev.endpoint == endpoint && bytes.Equal(prev.canonical, buf) {
		c.endpoint, c.model, c.canonical, c.hash = prev.endpoint, prev.model, prev.canonical, prev.hash
		return c, true
	}
	c.canonical = bytes.Clone(buf)
	c.hash = lake.HashFields(c.endpoint, string(buf))
	return c, true
}

// generalParseInput is ParseInput with encoding/json: the reference.
func generalParseInput(line []byte, keyField string) (InputRecord, *errkind.InputError) {
	var in openaiInputLine
	if err := json.Unmarshal(line, &in); err != nil {
		return InputRecord{}, &errkind.InputError{Msg: "not valid JSON: " + err.Error()}
	}
	var rec InputRecord
	id, ierr := stringField(in.CustomID, "custom_id")
	if ierr != nil {
		return rec, ierr
	}
	if !utf8.Valid(in.CustomID) { // json.Unmarshal would silently turn bad bytes into U+FFFD
		return rec, &errkind.InputError{Field: "custom_id", Msg: "not valid UTF-8"}
	}
	if err := checkID(id); err != nil {
		return rec, &errkind.InputError{Field: "custom_id", Msg: err.Error()}
	}
	rec.CustomID = id
	if in.Method != "POST" {
		return rec, &errkind.InputError{Field: "method", Msg: fmt.Sprintf("want \"POST\", got %q", in.Method)}
	}
	if !openaiEndpoints[in.URL] {
		return rec, &errkind.InputError{Field: "url", Msg: fmt.Sprintf("%q is not an OpenAI batch endpoint", in.URL)}
	}
	rec.Endpoint = in.URL
	var body map[string]json.RawMessage
	if len(in.Body) == 0 || json.Unmarshal(in.Body, &body) != nil || body == nil {
		return rec, &errkind.InputError{Field: "body", Msg: "want a JSON object"}
	}
	model, ierr := stringField(body["model"], "body.model")
	if ierr != nil {
		return rec, ierr
	}
	rec.Model = model
	rec.limit, rec.limitSet = bodyOutputLimit(func(key string) ([]byte, bool) {
		v, ok := body[key]
		return v, ok
	}), true
	cfg, err := canonicalWithout(body, contentFields...)
	if err != nil {
		return rec, &errkind.InputError{Field: "body", Msg: err.Error()}
	}
	rec.ConfigHash = lake.HashFields(in.URL, string(cfg))
	var compact bytes.Buffer
	compact.Grow(len(in.Body))
	if err := json.Compact(&compact, in.Body); err != nil {
		return rec, &errkind.InputError{Field: "body", Msg: err.Error()}
	}
	rec.RequestDigest = lake.NewFieldHasher().AddString(in.Method).AddString(in.URL).Add(compact.Bytes()).Sum()
	if keyField == "" || keyField == "custom_id" {
		rec.BusinessKey = id
	} else {
		k, ierr := lookupKey(line, keyField)
		if ierr != nil {
			return rec, ierr
		}
		rec.BusinessKey = k
	}
	return rec, nil
}

// checkID refuses ids that cannot round-trip through a provider and a lake.
func checkID(id string) error {
	if id == "" {
		return fmt.Errorf("empty")
	}
	if len(id) > maxCustomIDBytes {
		return fmt.Errorf("%d bytes, at most %d", len(id), maxCustomIDBytes)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("not valid UTF-8")
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("contains control character %U", r)
		}
	}
	return nil
}

func stringField(raw json.RawMessage, field string) (string, *errkind.InputError) {
	return (*jmemo)(nil).stringField(raw, field)
}

// stringField is stringField with a plain string carved from the memo's
// block (str).
func (m *jmemo) stringField(raw json.RawMessage, field string) (string, *errkind.InputError) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", &errkind.InputError{Field: field, Msg: "missing"}
	}
	s, ok := m.plainString(raw)
	if !ok {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", &errkind.InputError{Field: field, Msg: "want a string, got " + abbrev(raw)}
		}
	}
	if s == "" {
		return "", &errkind.InputError{Field: field, Msg: "empty"}
	}
	return s, nil
}

// lookupKey finds a dotted path (a.b.c) in a JSON line; the value must be a
// string or a number.
func lookupKey(line []byte, path string) (string, *errkind.InputError) {
	cur := json.RawMessage(line)
	for _, part := range strings.Split(path, ".") {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(cur, &obj); err != nil {
			return "", &errkind.InputError{Field: path, Msg: "missing (not inside an object)"}
		}
		v, ok := obj[part]
		if !ok {
			return "", &errkind.InputError{Field: path, Msg: "missing"}
		}
		cur = v
	}
	if !utf8.Valid(cur) {
		return "", &errkind.InputError{Field: path, Msg: "not valid UTF-8"}
	}
	var s string
	if json.Unmarshal(cur, &s) == nil {
		if s == "" {
			return "", &errkind.InputError{Field: path, Msg: "empty"}
		}
		return s, nil
	}
	var n json.Number
	if json.Unmarshal(cur, &n) == nil {
		return n.String(), nil
	}
	return "", &errkind.InputError{Field: path, Msg: "want a string or number, got " + abbrev(cur)}
}

func abbrev(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

func (openaiFormat) WithCustomID(line []byte, customID string) ([]byte, error) {
	return withTopField(line, "custom_id", customID)
}

// The output and error line envelope (BatchRequestOutput).
type openaiResultLine struct {
	ID       string          `json:"id"`
	CustomID json.RawMessage `json:"custom_id"`
	Response *openaiResponse `json:"response"`
	Error    *openaiLineErr  `json:"error"`

	memo *jmemo // the fast path's memo of the line, for the body's decoding
	// plainID is ID's bytes, not yet a string, when the fast path read
	// it as a string without escapes or non-ASCII bytes.
	plainID []byte
}

type openaiResponse struct {
	StatusCode *int32          `json:"status_code"`
	RequestID  string          `json:"request_id"`
	Body       json.RawMessage `json:"body"`

	decoded *openaiBody // Body, decoded by the fast path with its line (else nil)
}

type openaiLineErr struct {
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
}

type openaiCacheDetails struct {
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
}

type openaiReasoningDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

type openaiUsage struct {
	PromptTokens            int64                   `json:"prompt_tokens"`
	CompletionTokens        int64                   `json:"completion_tokens"`
	InputTokens             int64                   `json:"input_tokens"`
	OutputTokens            int64                   `json:"output_tokens"`
	PromptTokensDetails     *openaiCacheDetails     `json:"prompt_tokens_details"`
	InputTokensDetails      *openaiCacheDetails     `json:"input_tokens_details"`
	CompletionTokensDetails *openaiReasoningDetails `json:"completion_tokens_details"`
	OutputTokensDetails     *openaiReasoningDetails `json:"output_tokens_details"`
}

type openaiMessage struct {
	Content   json.RawMessage   `json:"content"`
	ToolCalls []json.RawMessage `json:"tool_calls"`
	Refusal   *string           `json:"refusal"`
	// FunctionCall is the one tool call of a request that names functions
	// (the older form of tools, still served): finish_reason function_call.
	FunctionCall json.RawMessage `json:"function_call"`

	// text is Content's string when the fast path read it as one without
	// escapes or non-ASCII bytes (plain).
	text  string
	plain bool
}

type openaiChoice struct {
	Message      *openaiMessage `json:"message"`
	Text         *string        `json:"text"`
	FinishReason string         `json:"finish_reason"`
}

type openaiOutputContent struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
}

type openaiOutput struct {
	Type    string                `json:"type"`
	Content []openaiOutputContent `json:"content"`
}

type openaiEmbedding struct {
	Embedding json.RawMessage `json:"embedding"`
}

type openaiIncomplete struct {
	Reason string `json:"reason"`
}

type openaiBodyErr struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

type openaiBody struct {
	Object            string            `json:"object"`
	Model             string            `json:"model"`
	Status            string            `json:"status"`
	IncompleteDetails *openaiIncomplete `json:"incomplete_details"`
	Usage             *openaiUsage      `json:"usage"`
	Choices           []openaiChoice    `json:"choices"`
	Output            []openaiOutput    `json:"output"`
	Data              []openaiEmbedding `json:"data"`
	Results           []json.RawMessage `json:"results"`
	Error             *openaiBodyErr    `json:"error"`
}

// resultLines are reused: a line's envelope escapes to the heap, and one
// allocated per line often lands on a page never touched before, whose first
// access (a read: the nil check before the first write) maps the kernel's
// zero page and whose first write then copies it and interrupts every core
// to flush its TLB entry.
var resultLines = sync.Pool{New: func() any { return new(openaiResultLine) }}

func (openaiFormat) ParseResult(line []byte, channel string) (lake.AttemptRow, error) {
	in := resultLines.Get().(*openaiResultLine)
	defer func() {
		in.memo.release()
		*in = openaiResultLine{} // holds nothing of the line while pooled
		resultLines.Put(in)
	}()
	if err := decodeResultLine(line, in); err != nil {
		return lake.AttemptRow{}, err
	}
	return openaiRow(in, decodeBody)
}

// decodeResultLine fills in from a result line: by a shape of the lines
// read before it (openai_shape.go), else with the fast scanner
// (openai_fast.go) where it is sure to decode as encoding/json would, else
// with encoding/json (generalResultLine). Release in.memo when done.
func decodeResultLine(line []byte, in *openaiResultLine) error {
	if shapeDecode(line, in) {
		return nil
	}
	if fastResultLine(line, in) {
		learnFrom(line, in)
		return nil
	}
	in.memo.release()
	*in = openaiResultLine{}
	return generalResultLine(line, in)
}

// generalResultLine is decodeResultLine with encoding/json: the reference.
func generalResultLine(line []byte, in *openaiResultLine) error {
	if err := json.Unmarshal(line, in); err != nil {
		return decodeError(err)
	}
	return nil
}

// A bodyDecoder fills b from a response body; jm is the memo of the line
// raw is part of, if the fast path read that line (else nil).
type bodyDecoder func(jm *jmemo, raw []byte, b *openaiBody) error

// decodeBody is the bodyDecoder of ParseResult: the fast scanner where it
// is sure, else encoding/json (generalBody).
func decodeBody(jm *jmemo, raw []byte, b *openaiBody) error {
	if fastBody(jm, raw, b) {
		return nil
	}
	*b = openaiBody{}
	return generalBody(jm, raw, b)
}

// generalBody is decodeBody with encoding/json: the reference.
func generalBody(_ *jmemo, raw []byte, b *openaiBody) error {
	if err := json.Unmarshal(raw, b); err != nil {
		return decodeError(err)
	}
	return nil
}

// openaiRow makes the attempt row of a decoded result line, decoding its
// response body with body.
func openaiRow(in *openaiResultLine, body bodyDecoder) (lake.AttemptRow, error) {
	var row lake.AttemptRow
	id, ierr := in.memo.stringField(in.CustomID, "custom_id")
	if ierr != nil {
		return row, fmt.Errorf("field custom_id: %s", ierr.Msg)
	}
	row.CustomID = id
	if in.Response == nil && in.Error == nil {
		return row, fmt.Errorf("neither response nor error is set")
	}
	if in.Error != nil {
		row.Outcome = "error"
		row.ErrorCode = codeString(in.Error.Code)
		row.ErrorMessage = in.Error.Message
	}
	if r := in.Response; r != nil {
		if r.StatusCode == nil {
			return row, fmt.Errorf("field response.status_code: missing")
		}
		row.StatusCode = r.StatusCode
		row.ProviderRequestID = r.RequestID
		if err := parseOpenAIBody(body, in.memo, r.Body, r.decoded, &row); err != nil {
			return row, fmt.Errorf("field response.body: %v", err)
		}
		if in.Error == nil {
			if *r.StatusCode >= 200 && *r.StatusCode < 300 {
				row.Outcome = "success"
			} else {
				row.Outcome = "error"
			}
		}
	}
	if row.ProviderRequestID == "" {
		row.ProviderRequestID = in.ID
		if in.plainID != nil {
			row.ProviderRequestID = string(in.plainID)
		}
	}
	return row, nil
}

// parseOpenAIBody decodes a response body with decode into row, unless
// the fast path decoded it with its line (b not nil); jm is the memo of the
// line raw is part of, if the fast path read that line.
func parseOpenAIBody(decode bodyDecoder, jm *jmemo, raw json.RawMessage, b *openaiBody, row *lake.AttemptRow) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if b == nil {
		b = jm.body()
		if err := decode(jm, raw, b); err != nil {
			return err
		}
	}
	row.ModelVersion = b.Model
	if u := b.Usage; u != nil {
		// Chat counts prompt/completion tokens, Responses input/output
		// tokens; a body has one pair, and the sums refuse overflow.
		var err error
		if row.InputTokens, err = addTokens(u.PromptTokens, u.InputTokens); err != nil {
			return err
		}
		if row.OutputTokens, err = addTokens(u.CompletionTokens, u.OutputTokens); err != nil {
			return err
		}
		for _, d := range []*openaiCacheDetails{u.PromptTokensDetails, u.InputTokensDetails} {
			if d == nil {
				continue
			}
			if row.CachedInputTokens, err = addTokens(row.CachedInputTokens, d.CachedTokens); err != nil {
				return err
			}
			if row.CacheWriteTokens, err = addTokens(row.CacheWriteTokens, d.CacheWriteTokens); err != nil {
				return err
			}
		}
		for _, d := range []*openaiReasoningDetails{u.CompletionTokensDetails, u.OutputTokensDetails} {
			if d == nil {
				continue
			}
			if row.ReasoningTokens, err = addTokens(row.ReasoningTokens, d.ReasoningTokens); err != nil {
				return err
			}
		}
		if err := checkUsage(row); err != nil {
			return err
		}
	}
	if e := b.Error; e != nil {
		row.ErrorType = e.Type
		if row.ErrorCode == "" {
			row.ErrorCode = codeString(e.Code)
		}
		if row.ErrorCode == "" {
			row.ErrorCode = e.Type
		}
		if row.ErrorMessage == "" {
			row.ErrorMessage = e.Message
		}
	}
	row.ResponseStatus = b.Status
	if b.IncompleteDetails != nil {
		row.FinishReason = b.IncompleteDetails.Reason
	}
	var text textJoin
	switch {
	case len(b.Choices) > 0:
		c := b.Choices[0]
		row.FinishReason = c.FinishReason
		if c.Message != nil {
			if c.Message.plain {
				text.add(c.Message.text)
			} else if s, ok := plainString(c.Message.Content); ok {
				text.add(s)
			} else if s, ok := contentString(c.Message.Content); ok {
				text.add(s)
			} else if len(c.Message.Content) > 0 && string(c.Message.Content) != "null" {
				// content parts
				var parts []struct {
					Text string `json:"text"`
				}
				if json.Unmarshal(c.Message.Content, &parts) == nil {
					for _, p := range parts {
						text.add(p.Text)
					}
				}
			}
			row.ToolCalls = int32(len(c.Message.ToolCalls))
			if f := c.Message.FunctionCall; len(f) > 0 && string(f) != "null" {
				row.ToolCalls++
			}
			if c.Message.Refusal != nil && *c.Message.Refusal != "" && text.Len() == 0 {
				row.FinishReason = "refusal"
			}
		}
		if c.Text != nil {
			text.add(*c.Text)
		}
		row.HasOutput = text.Len() > 0 || row.ToolCalls > 0
	case b.Object == "response" || len(b.Output) > 0:
		for _, o := range b.Output {
			switch {
			case o.Type == "message":
				for _, c := range o.Content {
					if c.Type == "output_text" {
						text.add(c.Text)
					}
					if c.Type == "refusal" && row.FinishReason == "" {
						row.FinishReason = "refusal"
					}
				}
			case strings.HasSuffix(o.Type, "_call"):
				row.ToolCalls++
			}
		}
		row.HasOutput = text.Len() > 0 || row.ToolCalls > 0
	case len(b.Data) > 0:
		row.HasOutput = len(b.Data[0].Embedding) > 2
	case len(b.Results) > 0:
		row.HasOutput = true
	}
	row.OutputText = text.String()
	return nil
}

// textJoin concatenates the text parts of an answer. The usual answer has
// one, which is kept as the string it is instead of copied into a builder.
type textJoin struct {
	first string // the only part so far, while b is empty
	b     strings.Builder
}

func (t *textJoin) add(s string) {
	switch {
	case s == "":
	case t.first == "" && t.b.Len() == 0:
		t.first = s
	default:
		if t.first != "" {
			t.b.WriteString(t.first)
			t.first = ""
		}
		t.b.WriteString(s)
	}
}

func (t *textJoin) Len() int { return len(t.first) + t.b.Len() }

func (t *textJoin) String() string {
	if t.b.Len() == 0 {
		return t.first
	}
	return t.b.String()
}

// codeString renders an error code that may be a string, a number or null.
func codeString(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return strconv.Quote(string(raw))
}
