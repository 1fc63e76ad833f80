package ingest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSampleIDs(t *testing.T) {
	ok := func(id string) string {
		return `{"custom_id":"` + id + `","response":{"status_code":200,"body":{"model":"m","choices":[{"message":{"content":"x"},"finish_reason":"stop"}]}}}`
	}
	tests := []struct {
		name  string
		body  string
		max   int
		lines int64
		ids   []string
		whole bool
	}{
		{"BOM, CRLF and blank lines", "\xef\xbb\xbf" + ok("a") + "\r\n\r\n" + ok("b") + "\r\n", 10, 2, []string{"a", "b"}, true},
		{"unreadable lines carry no id", ok("a") + "\n{not json\n[]\n" + ok("a") + "\n", 10, 4, []string{"a", "a"}, true},
		{"cut at max lines", ok("a") + "\n" + ok("b") + "\n" + ok("c") + "\n", 2, 2, []string{"a", "b"}, false},
		{"exactly max lines", ok("a") + "\n" + ok("b") + "\n", 2, 2, []string{"a", "b"}, true},
		{"empty file", "", 10, 0, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "out.jsonl")
			if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := SampleIDs(p, "openai", ChannelOutput, tc.max)
			if err != nil {
				t.Fatal(err)
			}
			if s.Lines != tc.lines || !slices.Equal(s.IDs, tc.ids) || s.Whole != tc.whole || s.File != "out.jsonl" {
				t.Errorf("SampleIDs = %+v; want lines %d, ids %v, whole %v", s, tc.lines, tc.ids, tc.whole)
			}
		})
	}
	if _, err := SampleIDs(filepath.Join(t.TempDir(), "absent.jsonl"), "openai", ChannelOutput, 10); err == nil || !strings.Contains(err.Error(), "absent.jsonl") {
		t.Errorf("absent file: %v, want a usage error naming it", err)
	}
}
