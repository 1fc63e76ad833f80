package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ParseLine reads one batch input line of a provider (openai, anthropic,
// bedrock, gemini) and returns its id and request. A field that does not
// translate is an *Untranslatable error naming it.
func ParseLine(provider string, line []byte) (id string, r *Request, err error) {
	switch provider {
	case OpenAI:
		return parseOpenAILine(line)
	case Anthropic:
		return parseEnvelope(line, "custom_id", "params", parseAnthropic)
	case Bedrock:
		return parseEnvelope(line, "recordId", "modelInput", parseBedrock)
	case Gemini:
		return parseEnvelope(line, "key", "request", parseGemini)
	}
	return "", nil, fmt.Errorf("translate: unknown provider %q", provider)
}

// object is a JSON object whose fields are taken one by one; what is left
// at the end did not translate.
type object struct {
	path string
	m    map[string]json.RawMessage
}

func decodeObject(raw json.RawMessage, path string) (*object, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, &Untranslatable{Field: path, Why: "want a JSON object"}
	}
	return &object{path: path, m: m}, nil
}

func (o *object) field(k string) string {
	if o.path == "" {
		return k
	}
	return o.path + "." + k
}

// take removes and returns a field (nil when absent or null).
func (o *object) take(keys ...string) (json.RawMessage, string) {
	for _, k := range keys {
		v, ok := o.m[k]
		if !ok {
			continue
		}
		delete(o.m, k)
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return nil, o.field(k)
		}
		return v, o.field(k)
	}
	return nil, ""
}

// drop removes fields that do not change the answer (caching hints,
// metadata), which translation leaves out.
func (o *object) drop(keys ...string) {
	for _, k := range keys {
		delete(o.m, k)
	}
}

// rest refuses the first field (by name) nobody took.
func (o *object) rest(why string) error {
	if len(o.m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(o.m))
	for k := range o.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if w, ok := knownWhy[keys[0]]; ok {
		why = w
	}
	return &Untranslatable{Field: o.field(keys[0]), Why: why}
}

// knownWhy names what the fields that most often stop a translation are.
var knownWhy = map[string]string{
	"tools": "tools do not translate", "tool_choice": "tools do not translate", "toolConfig": "tools do not translate",
	"functions": "tools do not translate", "function_call": "tools do not translate", "parallel_tool_calls": "tools do not translate",
	"tool_calls": "a tool call does not translate", "tool_call_id": "a tool result does not translate",
	"audio": "audio does not translate", "modalities": "audio and image output do not translate",
	"image": "images do not translate", "document": "documents do not translate",
	"inlineData": "inline data (images, audio, files) does not translate", "fileData": "files do not translate",
}

func str(raw json.RawMessage, path string) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", &Untranslatable{Field: path, Why: "want a string"}
	}
	return s, nil
}

func num(raw json.RawMessage, path string) (*float64, error) {
	if raw == nil {
		return nil, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, &Untranslatable{Field: path, Why: "want a number"}
	}
	return &f, nil
}

func count(raw json.RawMessage, path string) (int64, error) {
	if raw == nil {
		return 0, nil
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil || n < 1 {
		return 0, &Untranslatable{Field: path, Why: "want a positive integer"}
	}
	return n, nil
}

// stringList reads a string or a list of strings (OpenAI's stop).
func stringList(raw json.RawMessage, path string) ([]string, error) {
	if raw == nil {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, &Untranslatable{Field: path, Why: "want a string or a list of strings"}
	}
	return many, nil
}

func list(raw json.RawMessage, path string) ([]json.RawMessage, error) {
	var l []json.RawMessage
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, &Untranslatable{Field: path, Why: "want a list"}
	}
	return l, nil
}

func idx(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// addSystem appends a system text; a system message after the first turn
// does not translate (only OpenAI places one mid-conversation).
func (r *Request) addSystem(text, path string) error {
	if len(r.Turns) > 0 {
		return &Untranslatable{Field: path, Why: "a system message after the conversation began has no counterpart"}
	}
	if r.System != "" {
		r.System += "\n\n"
	}
	r.System += text
	return nil
}

func parseEnvelope(line []byte, idKey, bodyKey string, parse func(*object, *Request) error) (string, *Request, error) {
	top, err := decodeObject(line, "")
	if err != nil {
		return "", nil, err
	}
	rawID, idPath := top.take(idKey)
	if rawID == nil {
		return "", nil, &Untranslatable{Field: idKey, Why: "missing"}
	}
	id, err := str(rawID, idPath)
	if err != nil {
		return "", nil, err
	}
	rawBody, bodyPath := top.take(bodyKey)
	if rawBody == nil {
		return id, nil, &Untranslatable{Field: bodyKey, Why: "missing"}
	}
	if err := top.rest("not part of a " + bodyKey + " line"); err != nil {
		return id, nil, err
	}
	body, err := decodeObject(rawBody, bodyPath)
	if err != nil {
		return id, nil, err
	}
	r := &Request{}
	if err := parse(body, r); err != nil {
		return id, nil, err
	}
	return id, r, r.check(bodyPath)
}

// --- OpenAI ---

func parseOpenAILine(line []byte) (string, *Request, error) {
	top, err := decodeObject(line, "")
	if err != nil {
		return "", nil, err
	}
	rawID, idPath := top.take("custom_id")
	if rawID == nil {
		return "", nil, &Untranslatable{Field: "custom_id", Why: "missing"}
	}
	id, err := str(rawID, idPath)
	if err != nil {
		return "", nil, err
	}
	top.take("method")
	rawURL, urlPath := top.take("url")
	url, err := str(rawURL, urlPath)
	if err != nil {
		return id, nil, err
	}
	rawBody, bodyPath := top.take("body")
	if rawBody == nil {
		return id, nil, &Untranslatable{Field: "body", Why: "missing"}
	}
	if err := top.rest("not part of a batch request line"); err != nil {
		return id, nil, err
	}
	body, err := decodeObject(rawBody, bodyPath)
	if err != nil {
		return id, nil, err
	}
	r := &Request{}
	switch url {
	case ChatCompletions:
		err = parseOpenAIChat(body, r)
	case Responses:
		err = parseOpenAIResponses(body, r)
	default:
		err = &Untranslatable{Field: "url", Why: fmt.Sprintf("%q: only chat completions and responses requests translate", url)}
	}
	if err != nil {
		return id, nil, err
	}
	return id, r, r.check(bodyPath)
}

func parseOpenAIChat(b *object, r *Request) error {
	b.take("model")
	b.drop("user", "metadata", "store")
	if raw, p := b.take("n"); raw != nil {
		if n, err := count(raw, p); err != nil || n != 1 {
			return &Untranslatable{Field: p, Why: "more than one choice per request has no counterpart"}
		}
	}
	if raw, p := b.take("stream"); raw != nil && string(raw) != "false" {
		return &Untranslatable{Field: p, Why: "streaming is not batched"}
	}
	rawMsgs, path := b.take("messages")
	msgs, err := list(rawMsgs, path)
	if err != nil {
		return err
	}
	for i, raw := range msgs {
		mp := idx(path, i)
		m, err := decodeObject(raw, mp)
		if err != nil {
			return err
		}
		rawRole, rp := m.take("role")
		role, err := str(rawRole, rp)
		if err != nil {
			return err
		}
		rawContent, cp := m.take("content")
		if err := m.rest("no counterpart in the other formats"); err != nil {
			return err
		}
		if rawContent == nil {
			return &Untranslatable{Field: mp + ".content", Why: "a message without text content (a tool call) does not translate"}
		}
		text, err := openAIText(rawContent, cp, "text")
		if err != nil {
			return err
		}
		switch role {
		case "system", "developer":
			err = r.addSystem(text, mp)
		case "user":
			r.Turns = append(r.Turns, Turn{RoleUser, text})
		case "assistant":
			r.Turns = append(r.Turns, Turn{RoleAssistant, text})
		default:
			err = &Untranslatable{Field: rp, Why: fmt.Sprintf("role %q (tool results) does not translate", role)}
		}
		if err != nil {
			return err
		}
	}
	if raw, p := b.take("max_completion_tokens", "max_tokens"); raw != nil {
		if r.MaxTokens, err = count(raw, p); err != nil {
			return err
		}
	}
	if err := sampling(b, r, "temperature", "top_p"); err != nil {
		return err
	}
	if raw, p := b.take("stop"); raw != nil {
		if r.Stop, err = stringList(raw, p); err != nil {
			return err
		}
	}
	if raw, p := b.take("response_format"); raw != nil {
		f, err := decodeObject(raw, p)
		if err != nil {
			return err
		}
		rawT, tp := f.take("type")
		t, err := str(rawT, tp)
		if err != nil {
			return err
		}
		switch t {
		case "text":
		case "json_object":
			r.JSON = &JSONOutput{}
		case "json_schema":
			rawS, sp := f.take("json_schema")
			s, err := decodeObject(rawS, sp)
			if err != nil {
				return err
			}
			r.JSON = &JSONOutput{}
			if err := jsonSchemaFields(s, r.JSON); err != nil {
				return err
			}
		default:
			return &Untranslatable{Field: tp, Why: fmt.Sprintf("response format %q does not translate", t)}
		}
		if err := f.rest("no counterpart in the other formats"); err != nil {
			return err
		}
	}
	return b.rest("a provider-only parameter: no counterpart in the other formats")
}

// jsonSchemaFields reads {name, schema, strict, description} (OpenAI's
// json_schema objects; strict is what translation gives every target
// that enforces a schema).
func jsonSchemaFields(s *object, j *JSONOutput) error {
	if raw, p := s.take("name"); raw != nil {
		var err error
		if j.Name, err = str(raw, p); err != nil {
			return err
		}
	}
	raw, p := s.take("schema")
	if raw == nil {
		return &Untranslatable{Field: s.field("schema"), Why: "missing"}
	}
	if _, err := decodeObject(raw, p); err != nil {
		return err
	}
	j.Schema = compact(raw)
	s.drop("strict", "description")
	return s.rest("no counterpart in the other formats")
}

func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

func sampling(b *object, r *Request, temperature, topP string) error {
	var err error
	if raw, p := b.take(temperature); raw != nil {
		if r.Temperature, err = num(raw, p); err != nil {
			return err
		}
	}
	if raw, p := b.take(topP); raw != nil {
		if r.TopP, err = num(raw, p); err != nil {
			return err
		}
	}
	return nil
}

// openAIText reads a content string or a list of text parts of the given
// types (chat: text; responses: input_text, output_text).
func openAIText(raw json.RawMessage, path string, types ...string) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	parts, err := list(raw, path)
	if err != nil {
		return "", err
	}
	var texts []string
	for i, pr := range parts {
		pp := idx(path, i)
		p, err := decodeObject(pr, pp)
		if err != nil {
			return "", err
		}
		rawT, tp := p.take("type")
		t, err := str(rawT, tp)
		if err != nil {
			return "", err
		}
		ok := false
		for _, want := range types {
			ok = ok || t == want
		}
		if !ok {
			return "", &Untranslatable{Field: tp, Why: fmt.Sprintf("content part %q (images, audio, files) does not translate", t)}
		}
		rawText, xp := p.take("text")
		text, err := str(rawText, xp)
		if err != nil {
			return "", err
		}
		p.drop("annotations")
		if err := p.rest("no counterpart in the other formats"); err != nil {
			return "", err
		}
		texts = append(texts, text)
	}
	return strings.Join(texts, "\n"), nil
}

func parseOpenAIResponses(b *object, r *Request) error {
	b.take("model")
	b.drop("user", "metadata", "store")
	if raw, p := b.take("stream"); raw != nil && string(raw) != "false" {
		return &Untranslatable{Field: p, Why: "streaming is not batched"}
	}
	if raw, p := b.take("instructions"); raw != nil {
		text, err := str(raw, p)
		if err != nil {
			return err
		}
		if err := r.addSystem(text, p); err != nil {
			return err
		}
	}
	rawIn, path := b.take("input")
	if rawIn == nil {
		return &Untranslatable{Field: b.field("input"), Why: "missing"}
	}
	var s string
	if json.Unmarshal(rawIn, &s) == nil {
		r.Turns = append(r.Turns, Turn{RoleUser, s})
	} else {
		items, err := list(rawIn, path)
		if err != nil {
			return err
		}
		for i, raw := range items {
			ip := idx(path, i)
			it, err := decodeObject(raw, ip)
			if err != nil {
				return err
			}
			if rawT, tp := it.take("type"); rawT != nil {
				if t, err := str(rawT, tp); err != nil || t != "message" {
					return &Untranslatable{Field: tp, Why: fmt.Sprintf("input item %s (tool calls and their output) does not translate", rawT)}
				}
			}
			rawRole, rp := it.take("role")
			role, err := str(rawRole, rp)
			if err != nil {
				return err
			}
			rawContent, cp := it.take("content")
			if rawContent == nil {
				return &Untranslatable{Field: ip + ".content", Why: "missing"}
			}
			it.drop("id", "status")
			if err := it.rest("no counterpart in the other formats"); err != nil {
				return err
			}
			text, err := openAIText(rawContent, cp, "input_text", "output_text")
			if err != nil {
				return err
			}
			switch role {
			case "system", "developer":
				err = r.addSystem(text, ip)
			case "user":
				r.Turns = append(r.Turns, Turn{RoleUser, text})
			case "assistant":
				r.Turns = append(r.Turns, Turn{RoleAssistant, text})
			default:
				err = &Untranslatable{Field: rp, Why: fmt.Sprintf("role %q does not translate", role)}
			}
			if err != nil {
				return err
			}
		}
	}
	var err error
	if raw, p := b.take("max_output_tokens"); raw != nil {
		if r.MaxTokens, err = count(raw, p); err != nil {
			return err
		}
	}
	if err := sampling(b, r, "temperature", "top_p"); err != nil {
		return err
	}
	if raw, p := b.take("text"); raw != nil {
		t, err := decodeObject(raw, p)
		if err != nil {
			return err
		}
		if rawF, fp := t.take("format"); rawF != nil {
			f, err := decodeObject(rawF, fp)
			if err != nil {
				return err
			}
			rawT, tp := f.take("type")
			ft, err := str(rawT, tp)
			if err != nil {
				return err
			}
			switch ft {
			case "text":
			case "json_object":
				r.JSON = &JSONOutput{}
			case "json_schema":
				r.JSON = &JSONOutput{}
				if err := jsonSchemaFields(f, r.JSON); err != nil {
					return err
				}
			default:
				return &Untranslatable{Field: tp, Why: fmt.Sprintf("text format %q does not translate", ft)}
			}
			if err := f.rest("no counterpart in the other formats"); err != nil {
				return err
			}
		}
		if err := t.rest("no counterpart in the other formats"); err != nil {
			return err
		}
	}
	return b.rest("a provider-only parameter: no counterpart in the other formats")
}

// --- Anthropic messages (and the Claude InvokeModel body on Bedrock) ---

func parseAnthropic(b *object, r *Request) error {
	b.take("model")
	return parseClaude(b, r)
}

// systemAndTurns reads the shape Anthropic's messages and Bedrock's
// Converse share: a system prompt and a messages list of {role, content},
// each read by textOf.
func systemAndTurns(b *object, r *Request, textOf func(json.RawMessage, string) (string, error)) error {
	if raw, p := b.take("system"); raw != nil {
		text, err := textOf(raw, p)
		if err != nil {
			return err
		}
		if err := r.addSystem(text, p); err != nil {
			return err
		}
	}
	rawMsgs, path := b.take("messages")
	msgs, err := list(rawMsgs, path)
	if err != nil {
		return err
	}
	for i, raw := range msgs {
		mp := idx(path, i)
		m, err := decodeObject(raw, mp)
		if err != nil {
			return err
		}
		rawRole, rp := m.take("role")
		role, err := str(rawRole, rp)
		if err != nil {
			return err
		}
		rawContent, cp := m.take("content")
		if err := m.rest("no counterpart in the other formats"); err != nil {
			return err
		}
		text, err := textOf(rawContent, cp)
		if err != nil {
			return err
		}
		switch role {
		case "user":
			r.Turns = append(r.Turns, Turn{RoleUser, text})
		case "assistant":
			r.Turns = append(r.Turns, Turn{RoleAssistant, text})
		default:
			return &Untranslatable{Field: rp, Why: fmt.Sprintf("role %q", role)}
		}
	}
	return nil
}

func parseClaude(b *object, r *Request) error {
	b.drop("metadata")
	if err := systemAndTurns(b, r, claudeText); err != nil {
		return err
	}
	var err error
	if raw, p := b.take("max_tokens"); raw != nil {
		if r.MaxTokens, err = count(raw, p); err != nil {
			return err
		}
	}
	if err := sampling(b, r, "temperature", "top_p"); err != nil {
		return err
	}
	if raw, p := b.take("stop_sequences"); raw != nil {
		if r.Stop, err = stringList(raw, p); err != nil {
			return err
		}
	}
	// Structured outputs: output_config.format, or the beta's output_format.
	if raw, p := b.take("output_config"); raw != nil {
		oc, err := decodeObject(raw, p)
		if err != nil {
			return err
		}
		if rawF, fp := oc.take("format"); rawF != nil {
			if err := claudeFormat(rawF, fp, r); err != nil {
				return err
			}
		}
		if err := oc.rest("no counterpart in the other formats"); err != nil {
			return err
		}
	}
	if raw, p := b.take("output_format"); raw != nil {
		if err := claudeFormat(raw, p, r); err != nil {
			return err
		}
	}
	return b.rest("a provider-only parameter: no counterpart in the other formats")
}

func claudeFormat(raw json.RawMessage, path string, r *Request) error {
	f, err := decodeObject(raw, path)
	if err != nil {
		return err
	}
	rawT, tp := f.take("type")
	if t, err := str(rawT, tp); err != nil || t != "json_schema" {
		return &Untranslatable{Field: tp, Why: fmt.Sprintf("output format %s does not translate", rawT)}
	}
	r.JSON = &JSONOutput{}
	return jsonSchemaFields(f, r.JSON)
}

// claudeText reads a content string or a list of text blocks (a block's
// cache_control, a caching hint, is left out).
func claudeText(raw json.RawMessage, path string) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	blocks, err := list(raw, path)
	if err != nil {
		return "", err
	}
	var texts []string
	for i, br := range blocks {
		bp := idx(path, i)
		b, err := decodeObject(br, bp)
		if err != nil {
			return "", err
		}
		rawT, tp := b.take("type")
		if t, err := str(rawT, tp); err != nil || t != "text" {
			return "", &Untranslatable{Field: tp, Why: fmt.Sprintf("content block %s (images, documents, tool use) does not translate", rawT)}
		}
		rawText, xp := b.take("text")
		text, err := str(rawText, xp)
		if err != nil {
			return "", err
		}
		b.drop("cache_control")
		if err := b.rest("no counterpart in the other formats"); err != nil {
			return "", err
		}
		texts = append(texts, text)
	}
	return strings.Join(texts, "\n"), nil
}

// --- Bedrock: the Claude InvokeModel body, or Converse ---

func parseBedrock(b *object, r *Request) error {
	if raw, p := b.take("anthropic_version"); raw != nil {
		if _, err := str(raw, p); err != nil {
			return err
		}
		return parseClaude(b, r)
	}
	for _, native := range []string{"inputText", "prompt", "texts"} {
		if _, ok := b.m[native]; ok {
			return &Untranslatable{Field: b.field(native), Why: "a model-native body of a model other than Claude does not translate (use Converse)"}
		}
	}
	return parseConverse(b, r)
}

func parseConverse(b *object, r *Request) error {
	if err := systemAndTurns(b, r, converseText); err != nil {
		return err
	}
	if raw, p := b.take("inferenceConfig"); raw != nil {
		ic, err := decodeObject(raw, p)
		if err != nil {
			return err
		}
		if raw, p := ic.take("maxTokens"); raw != nil {
			if r.MaxTokens, err = count(raw, p); err != nil {
				return err
			}
		}
		if err := sampling(ic, r, "temperature", "topP"); err != nil {
			return err
		}
		if raw, p := ic.take("stopSequences"); raw != nil {
			if r.Stop, err = stringList(raw, p); err != nil {
				return err
			}
		}
		if err := ic.rest("no counterpart in the other formats"); err != nil {
			return err
		}
	}
	// outputConfig.textFormat {type: json_schema, structure: {jsonSchema:
	// {schema: "<the schema as a string>", name, description}}}.
	if raw, p := b.take("outputConfig"); raw != nil {
		oc, err := decodeObject(raw, p)
		if err != nil {
			return err
		}
		if rawF, fp := oc.take("textFormat"); rawF != nil {
			f, err := decodeObject(rawF, fp)
			if err != nil {
				return err
			}
			rawT, tp := f.take("type")
			if t, err := str(rawT, tp); err != nil || t != "json_schema" {
				return &Untranslatable{Field: tp, Why: fmt.Sprintf("text format %s does not translate", rawT)}
			}
			rawS, sp := f.take("structure")
			s, err := decodeObject(rawS, sp)
			if err != nil {
				return err
			}
			rawJ, jp := s.take("jsonSchema")
			j, err := decodeObject(rawJ, jp)
			if err != nil {
				return err
			}
			r.JSON = &JSONOutput{}
			if raw, p := j.take("name"); raw != nil {
				if r.JSON.Name, err = str(raw, p); err != nil {
					return err
				}
			}
			rawSchema, schemaPath := j.take("schema")
			doc, err := str(rawSchema, schemaPath)
			if err != nil {
				return err
			}
			if _, err := decodeObject(json.RawMessage(doc), schemaPath); err != nil {
				return err
			}
			r.JSON.Schema = compact(json.RawMessage(doc))
			j.drop("description")
			for _, o := range []*object{j, s, f} {
				if err := o.rest("no counterpart in the other formats"); err != nil {
					return err
				}
			}
		}
		if err := oc.rest("no counterpart in the other formats"); err != nil {
			return err
		}
	}
	return b.rest("a provider-only parameter: no counterpart in the other formats")
}

// converseText reads a list of Converse content blocks: text blocks (a
// cachePoint block, a caching hint, is left out).
func converseText(raw json.RawMessage, path string) (string, error) {
	blocks, err := list(raw, path)
	if err != nil {
		return "", err
	}
	var texts []string
	for i, br := range blocks {
		bp := idx(path, i)
		b, err := decodeObject(br, bp)
		if err != nil {
			return "", err
		}
		b.drop("cachePoint")
		if len(b.m) == 0 {
			continue
		}
		rawText, xp := b.take("text")
		if rawText == nil {
			return "", b.rest("a content block other than text (images, documents, tool use) does not translate")
		}
		text, err := str(rawText, xp)
		if err != nil {
			return "", err
		}
		if err := b.rest("no counterpart in the other formats"); err != nil {
			return "", err
		}
		texts = append(texts, text)
	}
	return strings.Join(texts, "\n"), nil
}

// --- Gemini generateContent (REST JSON takes camelCase and snake_case names) ---

func parseGemini(b *object, r *Request) error {
	if raw, p := b.take("systemInstruction", "system_instruction"); raw != nil {
		si, err := decodeObject(raw, p)
		if err != nil {
			return err
		}
		si.drop("role")
		rawParts, pp := si.take("parts")
		text, err := geminiText(rawParts, pp)
		if err != nil {
			return err
		}
		if err := si.rest("no counterpart in the other formats"); err != nil {
			return err
		}
		if err := r.addSystem(text, p); err != nil {
			return err
		}
	}
	rawContents, path := b.take("contents")
	contents, err := list(rawContents, path)
	if err != nil {
		return err
	}
	for i, raw := range contents {
		cp := idx(path, i)
		c, err := decodeObject(raw, cp)
		if err != nil {
			return err
		}
		role := "user"
		if rawRole, rp := c.take("role"); rawRole != nil {
			if role, err = str(rawRole, rp); err != nil {
				return err
			}
		}
		rawParts, pp := c.take("parts")
		if err := c.rest("no counterpart in the other formats"); err != nil {
			return err
		}
		text, err := geminiText(rawParts, pp)
		if err != nil {
			return err
		}
		switch role {
		case "user":
			r.Turns = append(r.Turns, Turn{RoleUser, text})
		case "model":
			r.Turns = append(r.Turns, Turn{RoleAssistant, text})
		default:
			return &Untranslatable{Field: cp + ".role", Why: fmt.Sprintf("role %q", role)}
		}
	}
	if raw, p := b.take("generationConfig", "generation_config"); raw != nil {
		gc, err := decodeObject(raw, p)
		if err != nil {
			return err
		}
		if raw, p := gc.take("maxOutputTokens", "max_output_tokens"); raw != nil {
			if r.MaxTokens, err = count(raw, p); err != nil {
				return err
			}
		}
		if raw, p := gc.take("candidateCount", "candidate_count"); raw != nil {
			if n, err := count(raw, p); err != nil || n != 1 {
				return &Untranslatable{Field: p, Why: "more than one candidate per request has no counterpart"}
			}
		}
		if raw, p := gc.take("temperature"); raw != nil {
			if r.Temperature, err = num(raw, p); err != nil {
				return err
			}
		}
		if raw, p := gc.take("topP", "top_p"); raw != nil {
			if r.TopP, err = num(raw, p); err != nil {
				return err
			}
		}
		if raw, p := gc.take("stopSequences", "stop_sequences"); raw != nil {
			if r.Stop, err = stringList(raw, p); err != nil {
				return err
			}
		}
		var mime string
		if raw, p := gc.take("responseMimeType", "response_mime_type"); raw != nil {
			if mime, err = str(raw, p); err != nil {
				return err
			}
		}
		switch mime {
		case "", "text/plain":
		case "application/json":
			r.JSON = &JSONOutput{}
		default:
			return &Untranslatable{Field: gc.field("responseMimeType"), Why: fmt.Sprintf("%q does not translate", mime)}
		}
		if raw, p := gc.take("responseJsonSchema", "response_json_schema"); raw != nil {
			if r.JSON == nil {
				return &Untranslatable{Field: p, Why: "a schema without responseMimeType application/json"}
			}
			if _, err := decodeObject(raw, p); err != nil {
				return err
			}
			r.JSON.Schema = compact(raw)
		}
		if _, p := gc.take("responseSchema", "response_schema"); p != "" {
			return &Untranslatable{Field: p, Why: "an OpenAPI-subset schema, not a JSON Schema: use responseJsonSchema"}
		}
		if err := gc.rest("no counterpart in the other formats"); err != nil {
			return err
		}
	}
	return b.rest("a provider-only parameter: no counterpart in the other formats")
}

func geminiText(raw json.RawMessage, path string) (string, error) {
	if raw == nil {
		return "", &Untranslatable{Field: path, Why: "missing"}
	}
	parts, err := list(raw, path)
	if err != nil {
		return "", err
	}
	var texts []string
	for i, pr := range parts {
		pp := idx(path, i)
		p, err := decodeObject(pr, pp)
		if err != nil {
			return "", err
		}
		rawText, xp := p.take("text")
		if rawText == nil {
			return "", p.rest("a part other than text (inline data, files, function calls) does not translate")
		}
		text, err := str(rawText, xp)
		if err != nil {
			return "", err
		}
		if err := p.rest("no counterpart in the other formats"); err != nil {
			return "", err
		}
		texts = append(texts, text)
	}
	return strings.Join(texts, "\n"), nil
}
