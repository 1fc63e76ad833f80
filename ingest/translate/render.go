package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// RenderLine writes a request as one batch input line of the target
// format, with the given id. A request the target cannot express (stop
// sequences on OpenAI responses, a temperature above Anthropic's range, no
// output limit where one is required) is an *Untranslatable error.
func RenderLine(t Target, id string, r *Request) ([]byte, error) {
	if err := t.Check(); err != nil {
		return nil, err
	}
	if err := r.check("request"); err != nil {
		return nil, err
	}
	var line any
	switch t.Provider {
	case OpenAI:
		if t.Endpoint == Responses {
			body, err := openAIResponsesBody(t, r)
			if err != nil {
				return nil, err
			}
			line = openAILine{CustomID: id, Method: "POST", URL: Responses, Body: body}
		} else {
			line = openAILine{CustomID: id, Method: "POST", URL: ChatCompletions, Body: openAIChatBody(t, r)}
		}
	case Anthropic:
		body, err := claudeBody(t, r, t.Model, "")
		if err != nil {
			return nil, err
		}
		line = anthropicLine{CustomID: id, Params: body}
	case Bedrock:
		var body any
		var err error
		if IsClaude(t.Model) {
			body, err = claudeBody(t, r, "", "bedrock-2023-05-31")
		} else {
			body = converseBody(r)
		}
		if err != nil {
			return nil, err
		}
		line = bedrockLine{RecordID: id, ModelInput: body}
	case Gemini:
		line = geminiLine{Key: id, Request: geminiBody(r)}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(line); err != nil {
		return nil, fmt.Errorf("translate %s: %w", id, err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// schemaName is the name a JSON Schema goes by where a format wants one.
func (j *JSONOutput) schemaName() string {
	if j.Name != "" {
		return j.Name
	}
	return "output"
}

// withInstruction is the system prompt with the JSON instruction appended,
// for a target with no JSON mode (Anthropic and Bedrock without a schema).
func withInstruction(r *Request) string {
	if r.JSON == nil || r.JSON.Schema != nil {
		return r.System
	}
	if r.System == "" {
		return JSONInstruction
	}
	return r.System + "\n\n" + JSONInstruction
}

// --- OpenAI ---

type openAILine struct {
	CustomID string `json:"custom_id"`
	Method   string `json:"method"`
	URL      string `json:"url"`
	Body     any    `json:"body"`
}

type openAIMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type openAIJSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
}

type openAIResponseFormat struct {
	Type       string            `json:"type"`
	JSONSchema *openAIJSONSchema `json:"json_schema,omitempty"`
}

type openAIChat struct {
	Model               string                `json:"model"`
	Messages            []openAIMessage       `json:"messages"`
	MaxCompletionTokens int64                 `json:"max_completion_tokens,omitempty"`
	Temperature         *float64              `json:"temperature,omitempty"`
	TopP                *float64              `json:"top_p,omitempty"`
	Stop                []string              `json:"stop,omitempty"`
	ResponseFormat      *openAIResponseFormat `json:"response_format,omitempty"`
}

func openAIChatBody(t Target, r *Request) openAIChat {
	b := openAIChat{Model: t.Model, MaxCompletionTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP, Stop: r.Stop}
	if r.System != "" {
		b.Messages = append(b.Messages, openAIMessage{"system", r.System})
	}
	for _, turn := range r.Turns {
		b.Messages = append(b.Messages, openAIMessage{turn.Role, turn.Text})
	}
	if j := r.JSON; j != nil {
		if j.Schema == nil {
			b.ResponseFormat = &openAIResponseFormat{Type: "json_object"}
		} else {
			b.ResponseFormat = &openAIResponseFormat{Type: "json_schema", JSONSchema: &openAIJSONSchema{Name: j.schemaName(), Schema: j.Schema, Strict: true}}
		}
	}
	return b
}

type openAITextFormat struct {
	Type   string          `json:"type"`
	Name   string          `json:"name,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict *bool           `json:"strict,omitempty"`
}

type openAITextOut struct {
	Format openAITextFormat `json:"format"`
}

type openAIResponsesReq struct {
	Model           string          `json:"model"`
	Instructions    string          `json:"instructions,omitempty"`
	Input           []openAIMessage `json:"input"`
	MaxOutputTokens int64           `json:"max_output_tokens,omitempty"`
	Temperature     *float64        `json:"temperature,omitempty"`
	TopP            *float64        `json:"top_p,omitempty"`
	Text            *openAITextOut  `json:"text,omitempty"`
}

func openAIResponsesBody(t Target, r *Request) (openAIResponsesReq, error) {
	b := openAIResponsesReq{Model: t.Model, Instructions: r.System, MaxOutputTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP}
	if len(r.Stop) > 0 {
		return b, &Untranslatable{Field: "stop", Why: "the responses API has no stop sequences"}
	}
	for _, turn := range r.Turns {
		b.Input = append(b.Input, openAIMessage{turn.Role, turn.Text})
	}
	if j := r.JSON; j != nil {
		if j.Schema == nil {
			b.Text = &openAITextOut{openAITextFormat{Type: "json_object"}}
		} else {
			strict := true
			b.Text = &openAITextOut{openAITextFormat{Type: "json_schema", Name: j.schemaName(), Schema: j.Schema, Strict: &strict}}
		}
	}
	return b, nil
}

// --- Anthropic messages and the Claude InvokeModel body ---

type anthropicLine struct {
	CustomID string `json:"custom_id"`
	Params   any    `json:"params"`
}

type claudeMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type claudeFormatOut struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

type claudeOutputConfig struct {
	Format claudeFormatOut `json:"format"`
}

type claudeReq struct {
	AnthropicVersion string              `json:"anthropic_version,omitempty"`
	Model            string              `json:"model,omitempty"`
	MaxTokens        int64               `json:"max_tokens"`
	System           string              `json:"system,omitempty"`
	Messages         []claudeMessage     `json:"messages"`
	Temperature      *float64            `json:"temperature,omitempty"`
	TopP             *float64            `json:"top_p,omitempty"`
	StopSequences    []string            `json:"stop_sequences,omitempty"`
	OutputConfig     *claudeOutputConfig `json:"output_config,omitempty"`
}

// claudeBody is the Messages API body (model set) or Bedrock's Claude
// InvokeModel body (anthropic_version set, no model). A JSON Schema goes
// in output_config.format (structured outputs); JSON without one is asked
// for in the system prompt.
func claudeBody(t Target, r *Request, model, version string) (claudeReq, error) {
	b := claudeReq{AnthropicVersion: version, Model: model, MaxTokens: r.MaxTokens, System: withInstruction(r),
		Temperature: r.Temperature, TopP: r.TopP, StopSequences: r.Stop}
	if b.MaxTokens == 0 {
		if t.MaxTokens == 0 {
			return b, &Untranslatable{Field: "max_tokens", Why: "the request sets no output limit and Claude requires one: pass --max-tokens"}
		}
		b.MaxTokens = t.MaxTokens
	}
	if r.Temperature != nil && (*r.Temperature < 0 || *r.Temperature > 1) {
		return b, &Untranslatable{Field: "temperature", Why: fmt.Sprintf("%g is outside Claude's range 0 to 1", *r.Temperature)}
	}
	for _, turn := range r.Turns {
		b.Messages = append(b.Messages, claudeMessage{turn.Role, turn.Text})
	}
	if j := r.JSON; j != nil && j.Schema != nil {
		b.OutputConfig = &claudeOutputConfig{claudeFormatOut{Type: "json_schema", Schema: j.Schema}}
	}
	return b, nil
}

// --- Bedrock Converse ---

type bedrockLine struct {
	RecordID   string `json:"recordId"`
	ModelInput any    `json:"modelInput"`
}

type converseBlock struct {
	Text string `json:"text"`
}

type converseMessage struct {
	Role    string          `json:"role"`
	Content []converseBlock `json:"content"`
}

type converseInference struct {
	MaxTokens     int64    `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

type converseJSONSchema struct {
	Schema string `json:"schema"`
	Name   string `json:"name,omitempty"`
}

type converseStructure struct {
	JSONSchema converseJSONSchema `json:"jsonSchema"`
}

type converseTextFormat struct {
	Type      string            `json:"type"`
	Structure converseStructure `json:"structure"`
}

type converseOutputConfig struct {
	TextFormat converseTextFormat `json:"textFormat"`
}

type converseReq struct {
	System          []converseBlock       `json:"system,omitempty"`
	Messages        []converseMessage     `json:"messages"`
	InferenceConfig *converseInference    `json:"inferenceConfig,omitempty"`
	OutputConfig    *converseOutputConfig `json:"outputConfig,omitempty"`
}

// converseBody is the Converse request body. A JSON Schema goes in
// outputConfig.textFormat (its schema a JSON string, as Bedrock wants);
// JSON without one is asked for in the system prompt.
func converseBody(r *Request) converseReq {
	var b converseReq
	if s := withInstruction(r); s != "" {
		b.System = []converseBlock{{s}}
	}
	for _, turn := range r.Turns {
		b.Messages = append(b.Messages, converseMessage{turn.Role, []converseBlock{{turn.Text}}})
	}
	if r.MaxTokens > 0 || r.Temperature != nil || r.TopP != nil || len(r.Stop) > 0 {
		b.InferenceConfig = &converseInference{MaxTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP, StopSequences: r.Stop}
	}
	if j := r.JSON; j != nil && j.Schema != nil {
		b.OutputConfig = &converseOutputConfig{converseTextFormat{Type: "json_schema",
			Structure: converseStructure{converseJSONSchema{Schema: string(j.Schema), Name: j.schemaName()}}}}
	}
	return b
}

// --- Gemini ---

type geminiLine struct {
	Key     string `json:"key"`
	Request any    `json:"request"`
}

type geminiPart struct {
	Text string `json:"text"`
}

type geminiContent struct {
	Role  string       `json:"role,omitempty"`
	Parts []geminiPart `json:"parts"`
}

type geminiGeneration struct {
	MaxOutputTokens    int64           `json:"maxOutputTokens,omitempty"`
	Temperature        *float64        `json:"temperature,omitempty"`
	TopP               *float64        `json:"topP,omitempty"`
	StopSequences      []string        `json:"stopSequences,omitempty"`
	ResponseMimeType   string          `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
}

type geminiReq struct {
	SystemInstruction *geminiContent    `json:"systemInstruction,omitempty"`
	Contents          []geminiContent   `json:"contents"`
	GenerationConfig  *geminiGeneration `json:"generationConfig,omitempty"`
}

// geminiBody is the GenerateContentRequest. JSON output is responseMimeType
// application/json, with responseJsonSchema when there is a schema.
func geminiBody(r *Request) geminiReq {
	var b geminiReq
	if r.System != "" {
		b.SystemInstruction = &geminiContent{Parts: []geminiPart{{r.System}}}
	}
	for _, turn := range r.Turns {
		role := "user"
		if turn.Role == RoleAssistant {
			role = "model"
		}
		b.Contents = append(b.Contents, geminiContent{Role: role, Parts: []geminiPart{{turn.Text}}})
	}
	g := geminiGeneration{MaxOutputTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP, StopSequences: r.Stop}
	if j := r.JSON; j != nil {
		g.ResponseMimeType = "application/json"
		g.ResponseJSONSchema = j.Schema
	}
	if g.MaxOutputTokens > 0 || g.Temperature != nil || g.TopP != nil || len(g.StopSequences) > 0 || g.ResponseMimeType != "" {
		b.GenerationConfig = &g
	}
	return b
}
