package ingest

import (
	"bytes"

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
// outputLimitKeys followed by a colon and a non-negative integer. A quoted
// key inside a string value is escaped (\"max_tokens\") and so never matches.
func outputLimit(line []byte) (int64, bool) {
	for _, k := range outputLimitKeys {
		for off := 0; off < len(line); {
			i := bytes.Index(line[off:], k)
			if i < 0 {
				break
			}
			i += off
			off = i + len(k)
			if i > 0 && line[i-1] == '\\' {
				continue
			}
			j := skipSpace(line, off)
			if j >= len(line) || line[j] != ':' {
				continue
			}
			j = skipSpace(line, j+1)
			var n int64
			d := 0
			for ; j < len(line) && isDigit(line[j]) && d < 15; j, d = j+1, d+1 {
				n = n*10 + int64(line[j]-'0')
			}
			if d > 0 {
				return n, true
			}
		}
	}
	return 0, false
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

// add estimates one request line and returns its input and output tokens.
func (e *estimator) add(line []byte) (in, out int64) {
	in = e.o.InputTokens
	if in == 0 {
		in = (int64(len(line)) + bytesPerToken - 1) / bytesPerToken
	}
	out, ok := outputLimit(line)
	if !ok {
		out = e.o.OutputTokens
		e.sum.NoOutputLimit++
	}
	e.sum.InputTokens += in
	e.sum.OutputTokens += out
	return in, out
}
