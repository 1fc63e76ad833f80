package translate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/ingest"
)

func f64(v float64) *float64 { return &v }

// exampleLines reads the providers' published example input files.
func exampleLines(t *testing.T, name string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "ingest", "testdata", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			out = append(out, append([]byte(nil), sc.Bytes()...))
		}
	}
	return out
}

// The requests of the providers' examples, as read.
func TestParseExamples(t *testing.T) {
	cases := []struct {
		provider, file string
		line           int
		id             string
		want           *Request
		refused        string // the field, if the line does not translate
	}{
		{OpenAI, "openai_input.jsonl", 0, "request-1", &Request{System: "You are a helpful assistant.", Turns: []Turn{{RoleUser, "Hello world!"}}, MaxTokens: 1000}, ""},
		{OpenAI, "openai_input.jsonl", 1, "request-2", &Request{System: "You are an unhelpful assistant.", Turns: []Turn{{RoleUser, "Hello world!"}}, MaxTokens: 1000}, ""},
		{OpenAI, "openai_input_responses.jsonl", 0, "doc-0001", &Request{Turns: []Turn{{RoleUser, "Tell me a three sentence bedtime story about a unicorn."}}, MaxTokens: 512}, ""},
		{OpenAI, "openai_input_responses.jsonl", 1, "doc-0002", &Request{System: "Answer in one word.", Turns: []Turn{{RoleUser, "Capital of France?"}}, MaxTokens: 16}, ""},
		{Anthropic, "anthropic_input_requests.jsonl", 0, "my-first-request", &Request{Turns: []Turn{{RoleUser, "Hello, world"}}, MaxTokens: 1024}, ""},
		// cache_control, a caching hint, is left out.
		{Anthropic, "anthropic_input_requests.jsonl", 2, "cached-req-001", &Request{System: "You are an AI assistant tasked with analyzing literary works.\n<the entire contents of Pride and Prejudice>",
			Turns: []Turn{{RoleUser, "Analyze the major themes in Pride and Prejudice."}}, MaxTokens: 512}, ""},
		{Bedrock, "bedrock_input.jsonl", 0, "CALL0000001", &Request{Turns: []Turn{{RoleUser, "Summarize the following call transcript: ..."}}, MaxTokens: 1024}, ""},
		{Bedrock, "bedrock_input.jsonl", 2, "3223593EFGH", nil, "modelInput.inputText"},
		{Bedrock, "bedrock_input_converse.jsonl", 0, "rec-00001", &Request{Turns: []Turn{{RoleUser, "Classify sentiment: Great product!"}}, MaxTokens: 64, Temperature: f64(0)}, ""},
		{Bedrock, "bedrock_input_converse.jsonl", 1, "rec-00002", &Request{System: "Answer with one word.", Turns: []Turn{{RoleUser, "Capital of France?"}}, MaxTokens: 16}, ""},
		{Gemini, "gemini_input.jsonl", 0, "request-1", &Request{Turns: []Turn{{RoleUser, "Describe the process of photosynthesis."}}, Temperature: f64(0.7)}, ""},
		{Gemini, "gemini_input.jsonl", 1, "request-2", &Request{Turns: []Turn{{RoleUser, "What are the main ingredients in a Margherita pizza?"}}}, ""},
	}
	for _, c := range cases {
		t.Run(c.file+"/"+c.id, func(t *testing.T) {
			line := exampleLines(t, c.file)[c.line]
			id, got, err := ParseLine(c.provider, line)
			if c.refused != "" {
				var u *Untranslatable
				if !errors.As(err, &u) || u.Field != c.refused {
					t.Fatalf("ParseLine: %v, want refusal of %s", err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if id != c.id || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ParseLine = %q %+v, want %q %+v", id, got, c.id, c.want)
			}
		})
	}
}

var targets = []Target{
	{Provider: OpenAI, Model: "gpt-4o-mini-2024-07-18"},
	{Provider: OpenAI, Model: "gpt-4.1-2025-04-14", Endpoint: Responses},
	{Provider: Anthropic, Model: "claude-sonnet-4-5-20250929", MaxTokens: 777},
	{Provider: Bedrock, Model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0", MaxTokens: 777},
	{Provider: Bedrock, Model: "amazon.nova-pro-v1:0"},
	{Provider: Gemini, Model: "gemini-2.5-flash"},
}

func targetName(t Target) string { return t.Provider + t.Endpoint + "/" + t.Model }

// expectAfter is what a request reads back as from a target's line: the
// documented changes (JSON without a schema becomes an instruction where
// the target has no JSON mode, the default output limit fills in for
// Claude, a schema's name is kept only where the format has one).
func expectAfter(t Target, r *Request) *Request {
	w := *r
	w.Turns = append([]Turn(nil), r.Turns...)
	claude := t.Provider == Anthropic || (t.Provider == Bedrock && IsClaude(t.Model))
	if r.JSON != nil {
		j := *r.JSON
		w.JSON = &j
		if j.Schema == nil && (claude || t.Provider == Bedrock) {
			w.System, w.JSON = withInstruction(r), nil
		} else if j.Schema != nil && (claude || t.Provider == Gemini) {
			w.JSON.Name = ""
		} else if j.Schema != nil {
			w.JSON.Name = j.schemaName()
		}
	}
	if claude && w.MaxTokens == 0 {
		w.MaxTokens = t.MaxTokens
	}
	return &w
}

// Every example that translates is written in every target format, which
// the target's own plan validation accepts, and reads back as the same
// request: both directions, every pair of formats.
func TestRoundTripEveryPair(t *testing.T) {
	var sources []struct {
		name string
		id   string
		r    *Request
	}
	for _, ex := range []struct{ provider, file string }{
		{OpenAI, "openai_input.jsonl"}, {OpenAI, "openai_input_responses.jsonl"}, {Anthropic, "anthropic_input_requests.jsonl"},
		{Bedrock, "bedrock_input.jsonl"}, {Bedrock, "bedrock_input_converse.jsonl"}, {Gemini, "gemini_input.jsonl"},
	} {
		for _, line := range exampleLines(t, ex.file) {
			id, r, err := ParseLine(ex.provider, line)
			if err != nil {
				continue // the refusals are TestParseExamples'
			}
			sources = append(sources, struct {
				name string
				id   string
				r    *Request
			}{ex.file + "/" + id, id, r})
		}
	}
	// And requests using every shared field.
	schema := json.RawMessage(`{"type":"object","properties":{"label":{"type":"string"}},"required":["label"],"additionalProperties":false}`)
	full := &Request{System: "Be terse.", Turns: []Turn{{RoleUser, "Hi"}, {RoleAssistant, "Hello."}, {RoleUser, "Label: great product"}},
		MaxTokens: 99, Temperature: f64(0.25), TopP: f64(0.9), Stop: []string{"END"}, JSON: &JSONOutput{Name: "verdict", Schema: schema}}
	anyJSON := &Request{Turns: []Turn{{RoleUser, "Give me JSON"}}, MaxTokens: 50, JSON: &JSONOutput{}}
	sources = append(sources, struct {
		name string
		id   string
		r    *Request
	}{"full", "full-1", full}, struct {
		name string
		id   string
		r    *Request
	}{"any-json", "json-1", anyJSON})

	for _, s := range sources {
		for _, tg := range targets {
			t.Run(s.name+"->"+targetName(tg), func(t *testing.T) {
				r := s.r
				if tg.Endpoint == Responses && len(r.Stop) > 0 {
					_, err := RenderLine(tg, s.id, r)
					var u *Untranslatable
					if !errors.As(err, &u) || u.Field != "stop" {
						t.Fatalf("stop sequences to responses: %v, want a refusal of stop", err)
					}
					return
				}
				line, err := RenderLine(tg, s.id, r)
				if err != nil {
					t.Fatal(err)
				}
				f, err := ingest.FormatFor(tg.Provider)
				if err != nil {
					t.Fatal(err)
				}
				rec, ierr := f.ParseInput(line, "")
				if ierr != nil {
					t.Fatalf("%s plan refuses the translated line %s: %v", tg.Provider, line, ierr)
				}
				if rec.CustomID != s.id {
					t.Fatalf("custom id %q, want %q", rec.CustomID, s.id)
				}
				id, back, err := ParseLine(tg.Provider, line)
				if err != nil {
					t.Fatalf("read back %s: %v", line, err)
				}
				if want := expectAfter(tg, r); id != s.id || !reflect.DeepEqual(back, want) {
					t.Fatalf("read back %s\n got %+v\nwant %+v", line, back, want)
				}
			})
		}
	}
}

// The field names each target format uses, checked against the
// providers' API references.
func TestRenderFieldNames(t *testing.T) {
	schema := json.RawMessage(`{"type":"object"}`)
	r := &Request{System: "S", Turns: []Turn{{RoleUser, "U"}}, MaxTokens: 10, Temperature: f64(0.5), TopP: f64(0.8), Stop: []string{"X"}, JSON: &JSONOutput{Name: "n", Schema: schema}}
	cases := []struct {
		t    Target
		want string
	}{
		{Target{Provider: OpenAI, Model: "gpt-4o"},
			`{"custom_id":"k","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o","messages":[{"role":"system","content":"S"},{"role":"user","content":"U"}],"max_completion_tokens":10,"temperature":0.5,"top_p":0.8,"stop":["X"],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"},"strict":true}}}}`},
		{Target{Provider: Anthropic, Model: "claude-haiku-4-5"},
			`{"custom_id":"k","params":{"model":"claude-haiku-4-5","max_tokens":10,"system":"S","messages":[{"role":"user","content":"U"}],"temperature":0.5,"top_p":0.8,"stop_sequences":["X"],"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}}}}`},
		{Target{Provider: Bedrock, Model: "anthropic.claude-3-haiku-20240307-v1:0"},
			`{"recordId":"k","modelInput":{"anthropic_version":"bedrock-2023-05-31","max_tokens":10,"system":"S","messages":[{"role":"user","content":"U"}],"temperature":0.5,"top_p":0.8,"stop_sequences":["X"],"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}}}}`},
		{Target{Provider: Bedrock, Model: "amazon.nova-lite-v1:0"},
			`{"recordId":"k","modelInput":{"system":[{"text":"S"}],"messages":[{"role":"user","content":[{"text":"U"}]}],"inferenceConfig":{"maxTokens":10,"temperature":0.5,"topP":0.8,"stopSequences":["X"]},"outputConfig":{"textFormat":{"type":"json_schema","structure":{"jsonSchema":{"schema":"{\"type\":\"object\"}","name":"n"}}}}}}`},
		{Target{Provider: Gemini, Model: "gemini-2.5-pro"},
			`{"key":"k","request":{"systemInstruction":{"parts":[{"text":"S"}]},"contents":[{"role":"user","parts":[{"text":"U"}]}],"generationConfig":{"maxOutputTokens":10,"temperature":0.5,"topP":0.8,"stopSequences":["X"],"responseMimeType":"application/json","responseJsonSchema":{"type":"object"}}}}`},
	}
	for _, c := range cases {
		t.Run(targetName(c.t), func(t *testing.T) {
			got, err := RenderLine(c.t, "k", r)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
		})
	}
	// JSON without a schema: a JSON mode where there is one, an instruction otherwise.
	anyJSON := &Request{Turns: []Turn{{RoleUser, "U"}}, MaxTokens: 5, JSON: &JSONOutput{}}
	for _, c := range []struct {
		t    Target
		want string
	}{
		{Target{Provider: OpenAI, Model: "m"}, `"response_format":{"type":"json_object"}`},
		{Target{Provider: OpenAI, Model: "m", Endpoint: Responses}, `"text":{"format":{"type":"json_object"}}`},
		{Target{Provider: Gemini, Model: "m"}, `"responseMimeType":"application/json"`},
		{Target{Provider: Anthropic, Model: "m"}, `"system":"` + JSONInstruction + `"`},
		{Target{Provider: Bedrock, Model: "amazon.nova-lite-v1:0"}, `"system":[{"text":"` + JSONInstruction + `"}]`},
	} {
		t.Run("json-object/"+targetName(c.t), func(t *testing.T) {
			got, err := RenderLine(c.t, "k", anyJSON)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(got), c.want) {
				t.Fatalf("%s lacks %s", got, c.want)
			}
		})
	}
}

// Requests using what does not translate are refused, naming the field.
func TestRefusals(t *testing.T) {
	cases := []struct {
		name, provider, line, field string
	}{
		{"openai tools", OpenAI, `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}}`, "body.tools"},
		{"openai image", OpenAI, `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"what is this"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}}`, "body.messages[0].content[1].type"},
		{"openai audio", OpenAI, `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAA","format":"wav"}}]}]}}`, "body.messages[0].content[0].type"},
		{"openai tool result", OpenAI, `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[]},{"role":"tool","content":"x","tool_call_id":"c"}]}}`, "body.messages[1].tool_calls"},
		{"openai seed", OpenAI, `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"hi"}],"seed":7}}`, "body.seed"},
		{"openai logprobs", OpenAI, `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"hi"}],"logprobs":true}}`, "body.logprobs"},
		{"openai n", OpenAI, `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"hi"}],"n":3}}`, "body.n"},
		{"openai late system", OpenAI, `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"system","content":"s"},{"role":"user","content":"again"}]}}`, "body.messages[1]"},
		{"openai embeddings", OpenAI, `{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":"hi"}}`, "url"},
		{"openai prefill", OpenAI, `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"{"}]}}`, "body"},
		{"responses reasoning", OpenAI, `{"custom_id":"a","method":"POST","url":"/v1/responses","body":{"model":"m","input":"hi","reasoning":{"effort":"high"}}}`, "body.reasoning"},
		{"responses image", OpenAI, `{"custom_id":"a","method":"POST","url":"/v1/responses","body":{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x"}]}]}}`, "body.input[0].content[0].type"},
		{"anthropic tools", Anthropic, `{"custom_id":"a","params":{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}}]}}`, "params.tools"},
		{"anthropic image", Anthropic, `{"custom_id":"a","params":{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA"}}]}]}}`, "params.messages[0].content[0].type"},
		{"anthropic top_k", Anthropic, `{"custom_id":"a","params":{"model":"m","max_tokens":5,"top_k":5,"messages":[{"role":"user","content":"hi"}]}}`, "params.top_k"},
		{"anthropic thinking", Anthropic, `{"custom_id":"a","params":{"model":"m","max_tokens":5,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}}`, "params.thinking"},
		{"converse tools", Bedrock, `{"recordId":"a","modelInput":{"messages":[{"role":"user","content":[{"text":"hi"}]}],"toolConfig":{"tools":[]}}}`, "modelInput.toolConfig"},
		{"converse image", Bedrock, `{"recordId":"a","modelInput":{"messages":[{"role":"user","content":[{"image":{"format":"png","source":{"bytes":"AA"}}}]}]}}`, "modelInput.messages[0].content[0].image"},
		{"converse additional fields", Bedrock, `{"recordId":"a","modelInput":{"messages":[{"role":"user","content":[{"text":"hi"}]}],"additionalModelRequestFields":{"top_k":5}}}`, "modelInput.additionalModelRequestFields"},
		{"bedrock titan", Bedrock, `{"recordId":"a","modelInput":{"inputText":"Roses are red"}}`, "modelInput.inputText"},
		{"gemini tools", Gemini, `{"key":"a","request":{"contents":[{"parts":[{"text":"hi"}]}],"tools":[{"googleSearch":{}}]}}`, "request.tools"},
		{"gemini inline data", Gemini, `{"key":"a","request":{"contents":[{"parts":[{"inlineData":{"mimeType":"image/png","data":"AA"}}]}]}}`, "request.contents[0].parts[0].inlineData"},
		{"gemini safety", Gemini, `{"key":"a","request":{"contents":[{"parts":[{"text":"hi"}]}],"safetySettings":[]}}`, "request.safetySettings"},
		{"gemini thinking", Gemini, `{"key":"a","request":{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"thinkingConfig":{"thinkingBudget":0}}}}`, "request.generationConfig.thinkingConfig"},
		{"gemini openapi schema", Gemini, `{"key":"a","request":{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"responseMimeType":"application/json","responseSchema":{"type":"OBJECT"}}}}`, "request.generationConfig.responseSchema"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := ParseLine(c.provider, []byte(c.line))
			var u *Untranslatable
			if !errors.As(err, &u) {
				t.Fatalf("ParseLine: %v, want a refusal of %s", err, c.field)
			}
			if u.Field != c.field {
				t.Fatalf("refused %s (%s), want %s", u.Field, u.Why, c.field)
			}
		})
	}
	// What a target cannot express is refused when it is written.
	for _, c := range []struct {
		name  string
		t     Target
		r     *Request
		field string
	}{
		{"no limit for claude", Target{Provider: Anthropic, Model: "m"}, &Request{Turns: []Turn{{RoleUser, "hi"}}}, "max_tokens"},
		{"temperature over claude's range", Target{Provider: Anthropic, Model: "m"}, &Request{Turns: []Turn{{RoleUser, "hi"}}, MaxTokens: 5, Temperature: f64(1.5)}, "temperature"},
		{"stop on responses", Target{Provider: OpenAI, Model: "m", Endpoint: Responses}, &Request{Turns: []Turn{{RoleUser, "hi"}}, Stop: []string{"x"}}, "stop"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := RenderLine(c.t, "a", c.r)
			var u *Untranslatable
			if !errors.As(err, &u) || u.Field != c.field {
				t.Fatalf("RenderLine: %v, want a refusal of %s", err, c.field)
			}
		})
	}
}
