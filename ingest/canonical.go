package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Canonical renders JSON canonically: object keys sorted, no insignificant
// white space, numbers exactly as written, no HTML escaping (docs/contract.md).
func Canonical(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return canonicalValue(v)
}

func canonicalValue(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	// encoding/json sorts map keys and keeps json.Number literals.
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// canonicalWithout renders a JSON object canonically without the given keys.
func canonicalWithout(obj map[string]json.RawMessage, drop ...string) ([]byte, error) {
	m := make(map[string]any, len(obj))
	for k, raw := range obj {
		skip := false
		for _, d := range drop {
			if k == d {
				skip = true
				break
			}
		}
		if skip {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		m[k] = v
	}
	return canonicalValue(m)
}
