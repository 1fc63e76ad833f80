package ingest

import (
	"bytes"
	"math"

	"github.com/batchlake/batchlake/lake"
)

// EstimateOptions set plan's token estimate (lake.Estimate).
type EstimateOptions struct {
	// InputTokens per record; 0: the request's bytes / BytesPerToken.
	InputTokens int64
	// OutputTokens per record where a request names no output limit.
	OutputTokens int64
}

// bytesPerToken is the rough size of a token in request JSON: an estimate,
// documented as such (docs/analysts.md), not a tokenizer.
const bytesPerToken = 4

// outputLimitKeys are the request fields that bound a response's tokens, in
// the providers' spellings (OpenAI chat and responses, Anthropic, Bedrock
// Converse, Gemini), most specific first.
var outputLimitKeys = [][]byte{
	[]byte(`"max_completion_tokens"`), []byte(`"max_output_tokens"`), []byte(`"max_tokens"`),
	[]byte(`"maxTokens"`), []byte(`"maxOutputTokens"`), []byte(`"max_tokens_to_sample"`),
}

// outputLimit finds the first output limit a request line names: a key of
// outputLimitKeys followed by a colon and a non-negative integer; when the
// line names several, the key earliest in outputLimitKeys wins, and of one
// key its first occurrence. A quoted key inside a string value is escaped
// (\"max_tokens\") and so never matches.
//
// Every key starts with `"max`, so one pass over the places that prefix
// occurs does what a search per key did in six (that ran in plan's serial
// shard writer, about a tenth of plan's cpu time; plan now finds the limit
// on its parsing cores, lineOutputLimit).
func outputLimit(line []byte) (int64, bool) {
	best, bestN := len(outputLimitKeys), int64(0)
	for off := 0; off < len(line); {
		i := bytes.Index(line[off:], outputLimitPrefix)
		if i < 0 {
			break
		}
		i += off
		off = i + len(outputLimitPrefix)
		if i > 0 && line[i-1] == '\\' {
			continue
		}
		for k, key := range outputLimitKeys[:best] {
			if !bytes.HasPrefix(line[i:], key) {
				continue
			}
			if n, ok := limitValue(line, i+len(key)); ok {
				best, bestN = k, n
			}
			break // keys are not prefixes of one another: at most one matches here
		}
		if best == 0 {
			break
		}
	}
	return bestN, best < len(outputLimitKeys)
}

// bodyOutputLimit is the output limit a request body names in a member of
// its own: of the keys of outputLimitKeys, the first whose member holds a
// non-negative integer (limitDigits' reading of it), clamped as
// lineOutputLimit clamps it; -1 for none. member gives the raw value of the
// body's member key, as JSON decodes the body. It is the provider's own
// reading of the request, and spares plan the scan of every line that
// lineOutputLimit makes, which would also find a key nested anywhere in the
// line (a parser that has the body's members at hand uses this).
func bodyOutputLimit(member func(key string) ([]byte, bool)) int32 {
	for _, k := range outputLimitNames {
		v, ok := member(k)
		if !ok {
			continue
		}
		if n, ok := limitDigits(v, skipSpace(v, 0)); ok {
			return int32(min(n, math.MaxInt32))
		}
	}
	return -1
}

// outputLimitNames are outputLimitKeys unquoted.
var outputLimitNames = func() []string {
	names := make([]string, len(outputLimitKeys))
	for i, k := range outputLimitKeys {
		names[i] = string(k[1 : len(k)-1])
	}
	return names
}()

// outputLimitPrefix starts every key of outputLimitKeys.
var outputLimitPrefix = []byte(`"max`)

// limitValue reads `: <digits>` at line[j:] (spaces allowed around the colon).
func limitValue(line []byte, j int) (int64, bool) {
	j = skipSpace(line, j)
	if j >= len(line) || line[j] != ':' {
		return 0, false
	}
	return limitDigits(line, skipSpace(line, j+1))
}

// limitDigits reads the integer at line[j:] as limitValue does: its first
// digits, at most 15 of them.
func limitDigits(line []byte, j int) (int64, bool) {
	var n int64
	d := 0
	for ; j < len(line) && isDigit(line[j]) && d < 15; j, d = j+1, d+1 {
		n = n*10 + int64(line[j]-'0')
	}
	return n, d > 0
}

// estimator sums the per-record estimates of one plan.
type estimator struct {
	o   EstimateOptions
	sum lake.Estimate
}

func newEstimator(o EstimateOptions) *estimator {
	e := &estimator{o: o}
	e.sum.InputPerRecord, e.sum.OutputPerRecord = o.InputTokens, o.OutputTokens
	if o.InputTokens == 0 {
		e.sum.BytesPerToken = bytesPerToken
	}
	return e
}

// lineOutputLimit is outputLimit as plan keeps it per record: -1 when the
// line sets none, at most math.MaxInt32.
func lineOutputLimit(line []byte) int32 {
	n, ok := outputLimit(line)
	if !ok {
		return -1
	}
	return int32(min(n, math.MaxInt32))
}

// add estimates one request line of n bytes whose output limit is limit
// (lineOutputLimit) and returns its input and output tokens.
func (e *estimator) add(n int64, limit int32) (in, out int64) {
	in = e.o.InputTokens
	if in == 0 {
		in = (n + bytesPerToken - 1) / bytesPerToken
	}
	out = int64(limit)
	if limit < 0 {
		out = e.o.OutputTokens
		e.sum.NoOutputLimit++
	}
	e.sum.InputTokens += in
	e.sum.OutputTokens += out
	return in, out
}
