package ingest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/batchlake/batchlake/errkind"
)

// Gemini's inline input is one JSON document, not
// JSONL: the requests of a batchGenerateContent body,
//
//	{"requests": [{"request": {GenerateContentRequest}, "metadata": {"key": "k1"}}, …]}
//
// or that list wrapped as the API nests it: {"requests": {"requests": […]}}
// (an inputConfig), {"inputConfig": …} / {"input_config": …}, or the whole
// create body {"batch": {"inputConfig": …}}. plan turns such a document
// into {key, request} lines, request n becoming line n, and plans those:
// the key is metadata.key unchanged (docs/contract.md: attempt 1 keeps the
// file's own ids), the request's bytes are kept (compacted), so record ids
// and the job key are those of the same requests given as JSONL.

// maxInlineDoc bounds an inline document (the API takes under 20 MB
// inline): a JSONL file whose first line is broken is not read whole while
// plan decides what it is.
const maxInlineDoc = 64 << 20

// errNotInline means the file is not an inline-requests document.
var errNotInline = errors.New("not a Gemini inline-requests document")

// geminiInlineInput converts path when it is an inline-requests document,
// returning the path of the converted JSONL (in tmpDir; the caller removes
// it), or "" when path is JSONL already.
func geminiInlineInput(path, tmpDir string) (string, error) {
	in, err := os.Open(path)
	if err != nil {
		return "", &errkind.UsageError{Msg: fmt.Sprintf("plan: %v", err)}
	}
	defer in.Close()
	out, err := os.CreateTemp(tmpDir, "batchlake-gemini-inline-*.jsonl")
	if err != nil {
		return "", err
	}
	w := bufio.NewWriter(out)
	_, cerr := convertGeminiInline(bufio.NewReader(in), w)
	if cerr == nil {
		cerr = w.Flush()
	}
	if err := out.Close(); cerr == nil {
		cerr = err
	}
	if cerr != nil {
		os.Remove(out.Name())
		if errors.Is(cerr, errNotInline) {
			return "", nil
		}
		var ie *errkind.InputError
		if errors.As(cerr, &ie) {
			ie.File = filepath.Base(path)
		}
		return "", cerr
	}
	return out.Name(), nil
}

// inlineKeys are the top-level fields that mark an inline document; a
// {key, request} line has none of them.
var inlineKeys = []string{"requests", "inputConfig", "input_config", "batch"}

// convertGeminiInline writes the requests of an inline document as
// {key, request} lines and returns how many. It returns errNotInline
// (having written nothing) when the first JSON value is not an object with
// one of inlineKeys. Structural problems are *errkind.InputError naming the field.
func convertGeminiInline(r io.Reader, w io.Writer) (int, error) {
	dec := json.NewDecoder(io.LimitReader(r, maxInlineDoc))
	var top map[string]json.RawMessage
	if err := dec.Decode(&top); err != nil || top == nil {
		return 0, errNotInline
	}
	found := false
	for _, k := range inlineKeys {
		_, ok := top[k]
		found = found || ok
	}
	if !found {
		return 0, errNotInline
	}
	if _, err := dec.Token(); err != io.EOF {
		return 0, &errkind.InputError{Msg: "an inline-requests document must be one JSON object, with nothing after it"}
	}
	list, field, err := inlineList(top)
	if err != nil {
		return 0, err
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(list, &elems); err != nil {
		return 0, &errkind.InputError{Field: field, Msg: "want an array of {request, metadata: {key}}"}
	}
	if len(elems) == 0 {
		return 0, &errkind.InputError{Field: field, Msg: "no requests"}
	}
	var buf bytes.Buffer
	for _, e := range elems {
		buf.Reset()
		var el struct {
			Request  json.RawMessage `json:"request"`
			Metadata json.RawMessage `json:"metadata"`
		}
		var md struct {
			Key json.RawMessage `json:"key"`
		}
		if err := json.Unmarshal(e, &el); err != nil || !isObject(e) {
			// Passed on as it is: plan reports it on its line.
			if err := json.Compact(&buf, e); err != nil {
				return 0, &errkind.InputError{Field: field, Msg: err.Error()}
			}
		} else {
			buf.WriteByte('{')
			if len(el.Metadata) > 0 && json.Unmarshal(el.Metadata, &md) == nil && len(md.Key) > 0 && string(md.Key) != "null" {
				buf.WriteString(`"key":`)
				json.Compact(&buf, md.Key)
				buf.WriteByte(',')
			}
			buf.WriteString(`"request":`)
			if len(el.Request) == 0 {
				buf.WriteString("null")
			} else if err := json.Compact(&buf, el.Request); err != nil {
				return 0, &errkind.InputError{Field: field, Msg: err.Error()}
			}
			buf.WriteByte('}')
		}
		buf.WriteByte('\n')
		if _, err := w.Write(buf.Bytes()); err != nil {
			return 0, err
		}
	}
	return len(elems), nil
}

func isObject(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) > 0 && b[0] == '{'
}

// inlineList finds the requests array in one of the accepted wrappings and
// names the field it came from.
func inlineList(top map[string]json.RawMessage) (json.RawMessage, string, error) {
	obj, path := top, ""
	for _, step := range []string{"batch", "inputConfig", "input_config"} {
		raw, ok := obj[step]
		if !ok {
			continue
		}
		var next map[string]json.RawMessage
		if err := json.Unmarshal(raw, &next); err != nil || next == nil {
			return nil, path + step, &errkind.InputError{Field: path + step, Msg: "want a JSON object"}
		}
		obj, path = next, path+step+"."
	}
	raw, ok := obj["requests"]
	if !ok {
		return nil, path + "requests", &errkind.InputError{Field: path + "requests", Msg: "missing"}
	}
	if isObject(raw) {
		var inner map[string]json.RawMessage
		if err := json.Unmarshal(raw, &inner); err != nil {
			return nil, path + "requests", &errkind.InputError{Field: path + "requests", Msg: err.Error()}
		}
		return inner["requests"], path + "requests.requests", nil
	}
	return raw, path + "requests", nil
}
