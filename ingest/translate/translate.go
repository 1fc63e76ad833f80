// Package translate moves one chat request between the providers' batch
// input formats — OpenAI chat completions and responses, Anthropic
// messages, Bedrock Converse and Claude InvokeModel bodies, Gemini
// generateContent — for what they share: the system prompt, user and
// assistant text turns, the output token limit, temperature, top_p, stop
// sequences and JSON output. Anything else (tools, images, audio, documents,
// provider-only parameters) does not translate: ParseLine and RenderLine
// name the field in an *Untranslatable error instead of dropping it.
//
// A request is read into Request, the shared part, and written from it; a
// line read from one format and written to another keeps its id.
package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Request is what the chat formats share.
type Request struct {
	// System is the system prompt ("" for none): every system text,
	// joined by a blank line.
	System string
	// Turns are the conversation, oldest first; it ends with a user turn.
	Turns []Turn
	// MaxTokens is the output token limit, 0 for none.
	MaxTokens int64
	// Temperature and TopP are the sampling settings, nil where unset.
	Temperature *float64
	TopP        *float64
	// Stop are the stop sequences.
	Stop []string
	// JSON, if set, asks for JSON output.
	JSON *JSONOutput
}

// Turn is one user or assistant text message.
type Turn struct {
	Role string // RoleUser or RoleAssistant
	Text string
}

// The roles of a Turn.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// JSONOutput asks for JSON: an object satisfying Schema, or any JSON
// object when Schema is nil.
type JSONOutput struct {
	Name   string          // the schema's name where the format has one
	Schema json.RawMessage // a JSON Schema document, nil for any JSON object
}

// Untranslatable says which field of a request has no counterpart in the
// other format, and why.
type Untranslatable struct {
	Field string // the JSON path in the line, e.g. body.tools
	Why   string
}

func (u *Untranslatable) Error() string { return fmt.Sprintf("field %s: %s", u.Field, u.Why) }

// The formats ParseLine reads and RenderLine writes.
const (
	OpenAI    = "openai"
	Anthropic = "anthropic"
	Bedrock   = "bedrock"
	Gemini    = "gemini"
)

// The OpenAI endpoints a request may use.
const (
	ChatCompletions = "/v1/chat/completions"
	Responses       = "/v1/responses"
)

// Target is the format a request is written in.
type Target struct {
	Provider string // openai, anthropic, bedrock or gemini
	// Model is the target model: in the body for OpenAI and Anthropic; for
	// Bedrock it picks the body (a Claude model gets the Claude InvokeModel
	// body, any other Converse); Gemini lines name none (the job's model).
	Model string
	// Endpoint is OpenAI's: ChatCompletions (the default) or Responses.
	Endpoint string
	// MaxTokens is the output token limit of a request that sets none,
	// where the target needs one (Anthropic and Claude bodies); 0 refuses
	// such a request.
	MaxTokens int64
}

// JSONInstruction is what a request asking for JSON gets appended to its
// system prompt where the target format has no way to ask for JSON.
const JSONInstruction = "Respond with a single JSON object and nothing else."

// Check says whether target is a format RenderLine writes.
func (t Target) Check() error {
	switch t.Provider {
	case OpenAI:
		if t.Endpoint != "" && t.Endpoint != ChatCompletions && t.Endpoint != Responses {
			return fmt.Errorf("endpoint %q: translated requests go to %s or %s", t.Endpoint, ChatCompletions, Responses)
		}
	case Anthropic, Bedrock, Gemini:
		if t.Endpoint != "" {
			return fmt.Errorf("endpoint %q: only OpenAI has a choice of endpoint", t.Endpoint)
		}
	default:
		return fmt.Errorf("provider %q: translate writes openai, anthropic, bedrock or gemini", t.Provider)
	}
	if t.Model == "" {
		return fmt.Errorf("no model for %s", t.Provider)
	}
	return nil
}

// IsClaude says whether a Bedrock model id names an Anthropic Claude model
// (also through an inference profile: us.anthropic.claude-…).
func IsClaude(model string) bool { return strings.Contains(model, "anthropic.claude") }

// check is what every format needs of a request.
func (r *Request) check(field string) error {
	if len(r.Turns) == 0 {
		return &Untranslatable{Field: field, Why: "no user turn"}
	}
	if r.Turns[len(r.Turns)-1].Role != RoleUser {
		return &Untranslatable{Field: field, Why: "ends with an assistant turn (a prefill), which only Anthropic continues"}
	}
	return nil
}
