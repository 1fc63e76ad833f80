package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/batchlake/batchlake/lake"
)

// Helpers shared by the Anthropic, Bedrock and Gemini formats.

// topFields decodes a line's top-level object and returns the named fields,
// matched exactly: unlike decoding into a struct, "RecordID" is not
// "recordId", so a line means one thing to plan, to WithCustomID and to the
// provider.
func topFields(line []byte, names ...string) ([]json.RawMessage, *InputError) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		return nil, &InputError{Msg: "not valid JSON: " + err.Error()}
	}
	if obj == nil {
		return nil, &InputError{Msg: "want a JSON object"}
	}
	out := make([]json.RawMessage, len(names))
	for i, n := range names {
		out[i] = obj[n]
	}
	return out, nil
}

// objectField decodes raw as a JSON object; field names it in the error.
func objectField(raw json.RawMessage, field string) (map[string]json.RawMessage, *InputError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, &InputError{Field: field, Msg: "missing"}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, &InputError{Field: field, Msg: "want a JSON object, got " + abbrev(raw)}
	}
	return obj, nil
}

// businessKey is the line's custom id, or the value at keyField when one is
// given and differs from the id field.
func businessKey(line []byte, keyField, idField, id string) (string, *InputError) {
	if keyField == "" || keyField == idField {
		return id, nil
	}
	return lookupKey(line, keyField)
}

// requestDigest identifies a request's content: the call it makes and its
// compact body. The custom id is not part of it, so a retry under a new id
// keeps its digest.
func requestDigest(body json.RawMessage, call ...string) (lake.Digest, error) {
	var compact bytes.Buffer
	compact.Grow(len(body))
	if err := json.Compact(&compact, body); err != nil {
		return lake.Digest{}, err
	}
	h := lake.NewFieldHasher()
	for _, c := range call {
		h.AddString(c)
	}
	return h.Add(compact.Bytes()).Sum(), nil
}

// withTopField returns a JSON object line with one top-level field set to a
// string value; every other field keeps its bytes (compacted).
func withTopField(line []byte, field, value string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	v, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	m[field] = v
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// checkUsage refuses token counts that cannot be true: negative counts,
// cached or cache-write tokens beyond the input, reasoning beyond the output.
func checkUsage(row *lake.AttemptRow) error {
	for _, n := range []int64{row.InputTokens, row.CachedInputTokens, row.CacheWriteTokens, row.OutputTokens, row.ReasoningTokens} {
		if n < 0 {
			return fmt.Errorf("usage: negative or overflowing token count %d", n)
		}
	}
	if row.CachedInputTokens+row.CacheWriteTokens > row.InputTokens || row.CachedInputTokens+row.CacheWriteTokens < 0 {
		return fmt.Errorf("usage: cache read %d and write %d tokens exceed input tokens %d", row.CachedInputTokens, row.CacheWriteTokens, row.InputTokens)
	}
	if row.ReasoningTokens > row.OutputTokens {
		return fmt.Errorf("usage: reasoning tokens %d exceed output tokens %d", row.ReasoningTokens, row.OutputTokens)
	}
	return nil
}

// addTokens sums token counts, refusing negative values and overflow.
func addTokens(ns ...int64) (int64, error) {
	var sum int64
	for _, n := range ns {
		if n < 0 {
			return 0, fmt.Errorf("usage: negative token count %d", n)
		}
		if sum > (1<<63-1)-n {
			return 0, fmt.Errorf("usage: token counts overflow")
		}
		sum += n
	}
	return sum, nil
}
