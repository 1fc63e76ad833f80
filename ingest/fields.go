package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/batchlake/batchlake/errkind"
	"github.com/batchlake/batchlake/lake"
)

// Helpers shared by the Anthropic, Bedrock and Gemini formats.

// topFields decodes a line's top-level object and returns the named fields,
// matched exactly: unlike decoding into a struct, "RecordID" is not
// "recordId", so a line means one thing to plan, to WithCustomID and to the
// provider.
func topFields(line []byte, names ...string) ([]json.RawMessage, *errkind.InputError) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		return nil, &errkind.InputError{Msg: "not valid JSON: " + err.Error()}
	}
	if obj == nil {
		return nil, &errkind.InputError{Msg: "want a JSON object"}
	}
	out := make([]json.RawMessage, len(names))
	for i, n := range names {
		out[i] = obj[n]
	}
	return out, nil
}

// objectField decodes raw as a JSON object; field names it in the error.
func objectField(raw json.RawMessage, field string) (map[string]json.RawMessage, *errkind.InputError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, &errkind.InputError{Field: field, Msg: "missing"}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, &errkind.InputError{Field: field, Msg: "want a JSON object, got " + abbrev(raw)}
	}
	return obj, nil
}

// businessKey is the line's custom id, or the value at keyField when one is
// given and differs from the id field.
func businessKey(line []byte, keyField, idField, id string) (string, *errkind.InputError) {
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
// string value; every other field keeps its bytes (compacted), and the
// fields come in key order, as encoding/json writes a map. A line as plan
// stores it (compact, plain keys, the field present) takes the fast path;
// any other, encoding/json's way (topFieldJSON), whose result it equals.
func withTopField(line []byte, field, value string) ([]byte, error) {
	v, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	if out, ok := topFieldFast(line, field, v); ok {
		return out, nil
	}
	return topFieldJSON(line, field, v)
}

// topFieldJSON is withTopField through encoding/json: the line decoded into a
// map (a repeated key keeps its last value) and encoded again.
func topFieldJSON(line []byte, field string, value json.RawMessage) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	m[field] = value
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// topFieldFast is topFieldJSON without a map or reflection, for a line that
// is an object with nothing around or between its tokens, whose keys hold
// no escape or non-ASCII byte (each is then its own encoding) and none
// repeated, and that has the field: its members, sorted, with the field's
// value replaced, are exactly what encoding/json writes. ok is false for any
// other line. (A retry shard rewrites every retried line; through
// encoding/json that was a third of the retry files' cpu.)
func topFieldFast(line []byte, field string, value []byte) (out []byte, ok bool) {
	if len(line) == 0 || line[0] != '{' {
		return nil, false
	}
	var arr [8]jmember
	ms := arr[:0]
	var fl jflags
	found := false
	end, ok := eachMember(nil, line, 0, 0, func(key []byte, kfl jflags, v []byte, vfl jflags) bool {
		if kfl&(jEscape|jHigh) != 0 {
			return false
		}
		fl |= vfl
		if string(key) == field {
			v, found = value, true
		}
		ms = append(ms, jmember{key, v})
		return true
	}, &fl)
	if !ok || end != len(line) || fl&jSpace != 0 || !found {
		return nil, false
	}
	return appendObject(make([]byte, 0, len(line)+len(value)), ms, func(dst, v []byte) ([]byte, bool) { return append(dst, v...), true })
}

// MaxLineTokens is the most tokens of any one kind (input, cached input,
// cache writes, output, reasoning) one result line may report. No model reads
// or writes a billion tokens in one request; a larger count is a corrupt or
// hostile line. The ceiling also bounds reconcile's arithmetic: a line's
// counts fit DECIMAL(18, 0) and its cost fits DECIMAL(38, 18) many times over
// (docs/costs.md).
const MaxLineTokens = 1_000_000_000

// checkUsage refuses token counts that cannot be true: negative counts,
// counts above MaxLineTokens, cached or cache-write tokens beyond the input,
// reasoning beyond the output. Every provider's parser calls it last, so a
// line it refuses is quarantined with the reason and its raw bytes, never
// priced.
func checkUsage(row *lake.AttemptRow) error {
	for _, c := range []struct {
		name string
		n    int64
	}{
		{"input tokens", row.InputTokens}, {"cached input tokens", row.CachedInputTokens}, {"cache write tokens", row.CacheWriteTokens},
		{"1h cache write tokens", row.CacheWrite1hTokens}, {"output tokens", row.OutputTokens}, {"reasoning tokens", row.ReasoningTokens},
		{"web search requests", row.WebSearchRequests},
	} {
		if c.n < 0 {
			return fmt.Errorf("usage: %s %d: negative (or the sum overflowed)", c.name, c.n)
		}
		if c.n > MaxLineTokens {
			return fmt.Errorf("usage: %s %d: above the ceiling of %d per line", c.name, c.n, MaxLineTokens)
		}
	}
	if row.CacheWrite1hTokens > row.CacheWriteTokens {
		return fmt.Errorf("usage: 1h cache write tokens %d exceed cache write tokens %d", row.CacheWrite1hTokens, row.CacheWriteTokens)
	}
	if row.CachedInputTokens+row.CacheWriteTokens > row.InputTokens {
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

// decodeError explains why a line did not decode: a value of the wrong type
// (a fraction or 1e3 where a token count must be an integer, a string for a
// number) names its field, as json.Unmarshal's own message does not say
// plainly; anything else is not valid JSON.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("field %s: want %s, got %s", te.Field, te.Type, te.Value)
	}
	return fmt.Errorf("not valid JSON: %v", err)
}
