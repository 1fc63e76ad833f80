package ingest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// topFieldCases are lines for withTopField: fast says whether the fast path
// must take the line (false: it must leave it to encoding/json). Either way
// the result must be encoding/json's.
var topFieldCases = []struct {
	name string
	line string
	fast bool
}{
	{"openai request, keys unsorted", `{"custom_id":"r1","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"a \"quoted\" <b> & \u2028 é"}]}}`, true},
	{"sorted already", `{"body":{},"custom_id":"r1"}`, true},
	{"only the field", `{"custom_id":"x"}`, true},
	{"field not a string", `{"custom_id":12,"b":[1,2,{"c":null}]}`, true},
	{"numbers as written", `{"custom_id":"x","n":1.50e+3,"m":-0}`, true},
	{"high bytes in values", "{\"custom_id\":\"x\",\"v\":\"\xff\xfe caf\xc3\xa9\"}", true},
	{"empty key", `{"":1,"custom_id":"x"}`, true},
	{"space between tokens", `{"custom_id": "x","b":1}`, false},
	{"space nested", `{"custom_id":"x","b":{"c": 1}}`, false},
	{"newline nested in array", "{\"custom_id\":\"x\",\"b\":[1,\n2]}", false},
	{"space around", ` {"custom_id":"x"}`, false},
	{"carriage return after", "{\"custom_id\":\"x\"}\r", false},
	{"escaped key", `{"custom\u005fid":"x","custom_id":"y"}`, false},
	{"non-ASCII key", `{"custom_id":"x","clé":1}`, false},
	{"repeated key", `{"custom_id":"x","b":1,"b":2}`, false},
	{"repeated field", `{"custom_id":"x","custom_id":"y"}`, false},
	{"field missing", `{"b":1}`, false},
	{"empty object", `{}`, false},
	{"deep nesting", `{"custom_id":"x","b":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`, false},
	{"not an object", `["custom_id"]`, false},
	{"null", `null`, false},
	{"truncated", `{"custom_id":"x","b":`, false},
	{"two objects", `{"custom_id":"x"}{"b":1}`, false},
	{"control byte in a string", "{\"custom_id\":\"x\",\"b\":\"\x01\"}", false},
}

func TestWithTopField(t *testing.T) {
	value := RetryCustomID(2, strings.Repeat("ab", 32))
	v, err := json.Marshal(value)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range topFieldCases {
		t.Run(c.name, func(t *testing.T) {
			line := []byte(c.line)
			want, werr := topFieldJSON(line, "custom_id", v)
			fast, ok := topFieldFast(line, "custom_id", v)
			if ok != c.fast {
				t.Fatalf("fast path took the line: %v, want %v", ok, c.fast)
			}
			if ok && !bytes.Equal(fast, want) {
				t.Fatalf("fast path:\n got %s\nwant %s", fast, want)
			}
			got, err := withTopField(line, "custom_id", value)
			if (err != nil) != (werr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("withTopField = %s, %v; encoding/json: %s, %v", got, err, want, werr)
			}
		})
	}
}

// FuzzWithTopField holds the fast path to encoding/json's result on any
// input: where it takes a line, the same bytes.
func FuzzWithTopField(f *testing.F) {
	seedLines(f)
	for _, c := range topFieldCases {
		f.Add([]byte(c.line))
	}
	v, _ := json.Marshal("retry-2-x")
	f.Fuzz(func(t *testing.T, line []byte) {
		fast, ok := topFieldFast(line, "custom_id", v)
		if !ok {
			return
		}
		want, err := topFieldJSON(line, "custom_id", v)
		if err != nil {
			t.Fatalf("fast path took a line encoding/json refuses (%v): %q", err, line)
		}
		if !bytes.Equal(fast, want) {
			t.Fatalf("fast path:\n got %q\nwant %q", fast, want)
		}
	})
}

func BenchmarkWithTopField(b *testing.B) {
	line := []byte(topFieldCases[0].line)
	value := RetryCustomID(2, strings.Repeat("ab", 32))
	v, _ := json.Marshal(value)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, err := withTopField(line, "custom_id", value); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := topFieldJSON(line, "custom_id", v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
