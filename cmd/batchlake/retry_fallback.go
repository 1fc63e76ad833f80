package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/reconcile"
)

// fallbackFlags are retry's flags for a child on another provider or model
// and for the family's output contract.
type fallbackFlags struct {
	provider, model, endpoint, schema string
	maxTokens                         int64
	skip                              bool
}

const fallbackLong = `

--provider P --model M makes the child for another provider or model (a
fallback): the records' requests are translated between the chat formats
(OpenAI chat completions and responses, Anthropic messages, Bedrock Converse
or the Claude InvokeModel body, Gemini generateContent) for what they share —
system prompt, user and assistant text turns, output token limit,
temperature, top_p, stop sequences and JSON output. A request using anything
else (tools, images, audio, provider-only parameters) is refused with exit 2
naming the record and the field, or with --skip-untranslatable left out of
the child and listed for manual handling. Record ids and lineage stay; the
child's manifest names the parent's provider and model beside its own.
--output-schema makes a JSON Schema the output contract of the child (by
default it inherits its parent's, or the schema the parent's reconcile
checked): reconcile checks every answer of the family against it. See
docs/fallback.md.`

func addFallbackFlags(c *cobra.Command) *fallbackFlags {
	f := &fallbackFlags{}
	fl := c.Flags()
	fl.StringVar(&f.provider, "provider", "", "make the child for this provider (openai, anthropic, bedrock, gemini), requests translated")
	fl.StringVar(&f.model, "model", "", "the child's model (with --provider, or alone for another model of the same provider)")
	fl.StringVar(&f.endpoint, "endpoint", "", "with --provider openai: /v1/chat/completions (default) or /v1/responses")
	fl.Int64Var(&f.maxTokens, "max-tokens", 0, "output token limit for translated requests that set none where the target needs one (Claude)")
	fl.BoolVar(&f.skip, "skip-untranslatable", false, "leave records whose requests do not translate out of the child, for manual handling, instead of exit 2")
	fl.StringVar(&f.schema, "output-schema", "", "JSON Schema file: the output contract every answer of the child must satisfy")
	c.Long += fallbackLong
	return f
}

// apply sets the retry options the flags ask for; the schema file is
// stored in the lake, where the child's manifest names it.
func (f *fallbackFlags) apply(ctx context.Context, l *lake.Lake, o *reconcile.RetryOptions) error {
	if f.provider != "" || f.model != "" {
		o.Fallback = &reconcile.Fallback{Provider: f.provider, Model: f.model, Endpoint: f.endpoint, MaxTokens: f.maxTokens, SkipUntranslatable: f.skip}
	} else if f.endpoint != "" || f.maxTokens != 0 || f.skip {
		return &errkind.UsageError{Msg: "retry: --endpoint, --max-tokens and --skip-untranslatable go with --provider/--model"}
	}
	if f.maxTokens < 0 {
		return &errkind.UsageError{Msg: "retry: --max-tokens must be positive"}
	}
	if f.schema == "" {
		return nil
	}
	b, err := os.ReadFile(f.schema)
	if err != nil {
		return &errkind.UsageError{Msg: "--output-schema: " + err.Error()}
	}
	s, err := reconcile.LoadOutputSchema(filepath.Base(f.schema), b)
	if err != nil {
		return err
	}
	o.OutputSchema, err = s.Store(ctx, l)
	return err
}
