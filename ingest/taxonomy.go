package ingest

import (
	"fmt"
	"strings"
)

// ErrorRule is one row of a provider's error taxonomy: how a failed result
// line reads once ingested (its status_code and its error_code or
// error_type) and whether reconcile retries it under its default rules
// (reconcile.DefaultRetryable, DefaultPermanent; a test in reconcile keeps
// the two in step). docs/errors.md shows these tables (TestErrorDocs keeps it
// in step).
type ErrorRule struct {
	// Status is the status_code: "429", a class such as "5xx", or "" for none.
	Status string
	// Code is the error_code (or error_type) as ingested; "" for any.
	Code      string
	Retryable bool
	Meaning   string
	// Source is where the rule comes from: the provider's batch docs,
	// batchlake's own default (docs/contract.md), [O] for observed provider
	// output or [M] for our own inference where the docs are silent.
	Source string
}

// ErrorTaxonomy is each provider's error taxonomy. Anything not listed is
// permanent (the manual queue), as reconcile treats it.
var ErrorTaxonomy = map[string][]ErrorRule{
	"openai": {
		{Code: "batch_expired", Retryable: true, Meaning: "not run before the 24 h window closed", Source: "OpenAI Batch guide"},
		{Code: "batch_cancelled", Retryable: true, Meaning: "not run: the batch was cancelled (retry unless the cancel was meant)", Source: "OpenAI Batch guide [O]; batchlake default"},
		{Status: "400", Code: "invalid_request_error", Meaning: "bad request (invalid_value, context_length_exceeded, model_not_found): fix it", Source: "OpenAI Batch guide"},
		{Status: "401", Meaning: "authentication", Source: "OpenAI Batch guide"},
		{Status: "403", Meaning: "permission", Source: "OpenAI Batch guide"},
		{Status: "404", Meaning: "not found", Source: "OpenAI Batch guide"},
		{Status: "408", Retryable: true, Meaning: "timeout", Source: "batchlake default"},
		{Status: "429", Code: "rate_limit_exceeded", Retryable: true, Meaning: "rate limited", Source: "OpenAI Batch guide"},
		{Status: "429", Code: "insufficient_quota", Meaning: "out of quota: retrying will not help", Source: "OpenAI Batch guide"},
		{Status: "5xx", Code: "server_error", Retryable: true, Meaning: "server error", Source: "OpenAI Batch guide"},
	},
	"anthropic": {
		{Code: "invalid_request_error", Meaning: "bad params (validated only when the batch ends): fix them", Source: "Anthropic batch docs"},
		{Code: "authentication_error", Meaning: "authentication", Source: "Anthropic batch docs"},
		{Code: "permission_error", Meaning: "permission", Source: "Anthropic batch docs"},
		{Code: "not_found_error", Meaning: "not found", Source: "Anthropic batch docs"},
		{Code: "billing_error", Meaning: "billing", Source: "Anthropic batch docs"},
		{Code: "rate_limit_error", Retryable: true, Meaning: "rate limited", Source: "Anthropic batch docs"},
		{Code: "timeout_error", Retryable: true, Meaning: "timeout", Source: "Anthropic batch docs"},
		{Code: "overloaded_error", Retryable: true, Meaning: "overloaded", Source: "Anthropic batch docs"},
		{Code: "api_error", Retryable: true, Meaning: "internal error", Source: "Anthropic batch docs"},
		{Code: "expired", Retryable: true, Meaning: "result type expired: not run within 24 h, not billed", Source: "Anthropic batch docs"},
		{Code: "canceled", Retryable: true, Meaning: "result type canceled: not run, not billed (retry unless the cancel was meant)", Source: "Anthropic batch docs; batchlake default"},
	},
	"bedrock": {
		{Status: "400", Meaning: "validation (malformed body, unsupported toolConfig): fix it", Source: "Bedrock batch docs"},
		{Status: "408", Retryable: true, Meaning: "model timeout", Source: "batchlake default"},
		{Status: "429", Retryable: true, Meaning: "throttled: retry in a new job", Source: "Bedrock batch docs [M]"},
		{Status: "5xx", Retryable: true, Meaning: "service error: retry in a new job", Source: "Bedrock batch docs [M]"},
	},
	"gemini": {
		{Code: "CANCELLED", Retryable: true, Meaning: "gRPC 1: cancelled (retry unless the cancel was meant)", Source: "batchlake default (as batch_cancelled) [M]"},
		{Code: "UNKNOWN", Meaning: "gRPC 2, or an error line without a code", Source: "Gemini batch docs [M]"},
		{Code: "INVALID_ARGUMENT", Meaning: "gRPC 3: fix the request", Source: "Gemini batch docs"},
		{Code: "DEADLINE_EXCEEDED", Retryable: true, Meaning: "gRPC 4", Source: "Gemini batch docs"},
		{Code: "NOT_FOUND", Meaning: "gRPC 5", Source: "Gemini batch docs [M]"},
		{Code: "PERMISSION_DENIED", Meaning: "gRPC 7", Source: "Gemini batch docs [M]"},
		{Code: "RESOURCE_EXHAUSTED", Retryable: true, Meaning: "gRPC 8: quota or rate", Source: "Gemini batch docs"},
		{Code: "FAILED_PRECONDITION", Meaning: "gRPC 9", Source: "Gemini batch docs [M]"},
		{Code: "ABORTED", Retryable: true, Meaning: "gRPC 10: concurrency conflict, retry at a higher level", Source: "google.rpc.Code [M]"},
		{Code: "INTERNAL", Retryable: true, Meaning: "gRPC 13", Source: "Gemini batch docs"},
		{Code: "UNAVAILABLE", Retryable: true, Meaning: "gRPC 14", Source: "Gemini batch docs"},
		{Code: "UNAUTHENTICATED", Meaning: "gRPC 16", Source: "Gemini batch docs [M]"},
		{Status: "429", Retryable: true, Meaning: "an HTTP-style status in the error (REST shape)", Source: "Gemini batch docs [O]; batchlake default"},
		{Status: "5xx", Retryable: true, Meaning: "an HTTP-style status in the error (REST shape)", Source: "batchlake default"},
	},
}

// TaxonomyMarkdown renders a provider's taxonomy as the Markdown table that
// docs/errors.md shows.
func TaxonomyMarkdown(provider string) string {
	var b strings.Builder
	b.WriteString("| status_code | error_code / error_type | default | meaning | source |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	for _, r := range ErrorTaxonomy[provider] {
		class := "permanent"
		if r.Retryable {
			class = "retryable"
		}
		cell := func(s string) string {
			if s == "" {
				return "—"
			}
			return "`" + s + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(r.Status), cell(r.Code), class, r.Meaning, r.Source)
	}
	b.WriteString("| other | other | permanent | anything not listed goes to the manual queue | batchlake default |\n")
	return b.String()
}
