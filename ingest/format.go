package ingest

import (
	"fmt"
	"sort"
	"strings"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

// InputRecord is what a provider's input line says about one request.
type InputRecord struct {
	CustomID    string
	BusinessKey string
	Endpoint    string
	// Model is the model the line names; empty where the provider's lines
	// name none (Bedrock, Gemini): plan then uses PlanOptions.Model and folds
	// it into ConfigHash.
	Model string
	// ConfigHash is the model-config hash (docs/contract.md): the canonical request
	// body without its per-record content, plus the endpoint.
	ConfigHash lake.Digest
	// RequestDigest identifies the request's content (method, url, compact body).
	RequestDigest lake.Digest
	// limit is the output token limit the request's body names in a member
	// of its own (bodyOutputLimit: -1 for none), where the format reads it
	// from the parsed body (limitSet); for the others plan scans the line
	// for it (lineOutputLimit).
	limit    int32
	limitSet bool
}

// laterDigester is a Format that can leave a line's request digest to its
// caller: where it does, RequestDigest is zero and the call returned is the
// request, its Body non-nil. plan hashes two lines' requests together, in
// about the time of one (lake.HashCall2). The call comes back by value: a
// pointer passed through the interface would move each line's parse result
// to the heap.
type laterDigester interface {
	parseInputLater(line []byte, keyField string) (InputRecord, lake.Call, *errkind.InputError)
}

// Format is one provider's file formats. The providers: openai (openai.go),
// anthropic (anthropic.go), bedrock (bedrock.go), gemini (gemini.go); their
// error taxonomies are in taxonomy.go and docs/errors.md.
type Format interface {
	// Name is the provider name used on the command line and in the lake.
	Name() string
	// ParseInput validates one input line; field errors name the JSON field.
	ParseInput(line []byte, keyField string) (InputRecord, *errkind.InputError)
	// ParseResult normalises one output or error line. An error means the line
	// is quarantined with that reason.
	ParseResult(line []byte, channel string) (lake.AttemptRow, error)
	// WithCustomID returns the input line with its custom id replaced.
	WithCustomID(line []byte, customID string) ([]byte, error)
	// Limits are the provider's per-file limits: requests and bytes.
	Limits() (records int, bytes int64)
	// DefaultKeyField is the field holding the business key by default.
	DefaultKeyField() string
}

var formats = map[string]Format{}

// Register adds a provider format; called from init functions.
func Register(f Format) { formats[f.Name()] = f }

// SimProvider is the built-in simulator's provider name. Its jobs use
// OpenAI's file format; their manifests say sim.
const SimProvider = "sim"

// FormatFor returns the format of a provider.
func FormatFor(provider string) (Format, error) {
	if provider == SimProvider {
		provider = "openai" // the simulator speaks OpenAI's batch format
	}
	f, ok := formats[provider]
	if !ok {
		return nil, &errkind.UsageError{Msg: fmt.Sprintf("unknown provider %q (have %s)", provider, strings.Join(Providers(), ", "))}
	}
	return f, nil
}

// Providers lists the provider names a job, an attempt row or a price row
// can carry, sorted: the registered formats and the simulator.
func Providers() []string {
	names := []string{SimProvider}
	for n := range formats {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// RetryCustomID is the custom id batchlake gives a record in attempt n > 1:
// "a<n>_" and the first 56 hex digits of the record id. It fits every
// provider's alphabet and length ([A-Za-z0-9_-], at most 64 characters):
// past attempt 99999 fewer hex digits are kept so that it still fits.
func RetryCustomID(attempt int, recordID string) string {
	prefix := fmt.Sprintf("a%d_", attempt)
	if n := min(56, 64-len(prefix)); len(recordID) > n {
		recordID = recordID[:n]
	}
	return prefix + recordID
}
