package ingest

import (
	"strconv"
	"strings"
	"testing"
)

// TestNotUTF8 names the member whose key or string holds the first byte that
// is not UTF-8, after nested objects and arrays have closed before it.
func TestNotUTF8(t *testing.T) {
	const bad = "\xff"
	cases := []struct {
		name, line, field string
	}{
		{"valid", `{"a": "caf\u00e9", "b": ["é", "😀"]}`, ""},
		{"top-level value", `{"custom_id": "x` + bad + `"}`, "custom_id"},
		{"top-level key", `{"a": 1, "k` + bad + `": 2}`, "k\ufffd"},
		{"after a closed object", `{"a": {"b": {"c": 1}}, "d": "` + bad + `"}`, "d"},
		{"after a closed array", `{"a": [[1, 2], [3]], "b": ["x", "y` + bad + `"]}`, "b[1]"},
		{"array of arrays", `{"a": [[1], [2, "` + bad + `"]]}`, "a[1][1]"},
		{"object in an array", `{"m": [{"r": "u"}, {"r": "u", "c": [{"t": "` + bad + `"}]}]}`, "m[1].c[0].t"},
		{"a cut sequence", `{"m": "caf` + "\xc3" + `"}`, "m"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := notUTF8([]byte(c.line))
			if c.field == "" {
				if err != nil {
					t.Fatalf("valid line refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("line not refused")
			}
			if err.Field != c.field {
				t.Errorf("field %q, want %q", err.Field, c.field)
			}
			at := strings.Index(c.line, bad) + 1 // the first byte that is not UTF-8, from 1
			if c.name == "a cut sequence" {
				at = strings.Index(c.line, "\xc3") + 1
			}
			if !strings.Contains(err.Msg, "at byte "+strconv.Itoa(at)+" ") {
				t.Errorf("message %q does not name byte %d", err.Msg, at)
			}
		})
	}
}
