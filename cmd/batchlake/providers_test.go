package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/internal/fakeanthropic"
	"github.com/batchlake/batchlake/internal/fakegemini"
	"github.com/batchlake/batchlake/internal/fakeopenai"
)

// TestAnthropicAndGeminiCLI runs plan, submit (twice), status, collect and
// reconcile as processes against the fake Anthropic and Gemini servers, and
// checks the exit codes, the exact report and that the key is nowhere.
func TestAnthropicAndGeminiCLI(t *testing.T) {
	type provider struct {
		name, keyEnv, urlEnv, key string
		line                      string // input line format: %[1]s the id, %[2]d the number
		planExtra                 []string
		start                     func(key string) (url string, close func())
	}
	failing := map[string]bool{"r-001": true, "r-004": true}
	provs := []provider{{
		name: "anthropic", keyEnv: "ANTHROPIC_API_KEY", urlEnv: "ANTHROPIC_BASE_URL", key: "sk-ant-api03-CLITEST0123456789SECRET",
		line: `{"custom_id":%q,"params":{"model":"claude-sonnet-4-6","max_tokens":32,"messages":[{"role":"user","content":"q %d"}]}}`,
		start: func(key string) (string, func()) {
			srv := fakeanthropic.New(fakeanthropic.Options{APIKey: key, Outcome: func(id string) string {
				if failing[id] {
					return fakeanthropic.Errored
				}
				return fakeanthropic.Succeeded
			}})
			hs := httptest.NewServer(srv.Handler())
			srv.SetBaseURL(hs.URL)
			return hs.URL, hs.Close
		},
	}, {
		name: "gemini", keyEnv: "GEMINI_API_KEY", urlEnv: "GOOGLE_GEMINI_BASE_URL", key: "AIzaCLITEST0123456789abcdSECRET",
		line:      `{"key":%q,"request":{"contents":[{"parts":[{"text":"q %d"}]}]}}`,
		planExtra: []string{"--model", "gemini-2.5-flash"},
		start: func(key string) (string, func()) {
			srv := fakegemini.New(fakegemini.Options{APIKey: key, Outcome: func(k string) string {
				if failing[k] {
					return fakegemini.Internal
				}
				return fakegemini.OK
			}})
			hs := httptest.NewServer(srv.Handler())
			srv.SetBaseURL(hs.URL)
			return hs.URL, hs.Close
		},
	}}
	for _, p := range provs {
		t.Run(p.name, func(t *testing.T) {
			h := newHarness(t, fakeopenai.Options{})
			url, stop := p.start(p.key)
			defer stop()
			env := []string{p.keyEnv + "=" + p.key, p.urlEnv + "=" + url}
			var b strings.Builder
			for i := range 6 {
				fmt.Fprintf(&b, p.line+"\n", fmt.Sprintf("r-%03d", i), i)
			}
			in := filepath.Join(h.tmp, "in.jsonl")
			if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			run := func(want int, args ...string) result {
				t.Helper()
				r := h.runEnv(env, args...)
				if r.code != want || r.killed {
					t.Fatalf("want exit %d, got %s", want, r)
				}
				if strings.Contains(r.stdout+r.stderr, p.key) {
					t.Fatalf("the key leaked: %s", r)
				}
				return r
			}
			plan := run(0, append([]string{"plan", "--provider", p.name, "--input", in, "--tenant", "acme", "--prompt-version", "v1", "--shard-max-records", "3"}, p.planExtra...)...)
			var pr struct {
				JobKey string `json:"job_key"`
			}
			if err := json.Unmarshal([]byte(plan.stdout), &pr); err != nil {
				t.Fatalf("plan output: %v: %s", err, plan.stdout)
			}
			step := func(s string) []string { return []string{s, "--provider", p.name, "--job", pr.JobKey} }
			actions := func(r result) string {
				var res struct {
					Shards []struct{ Action string }
				}
				if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
					t.Fatalf("%v: %s", err, r.stdout)
				}
				var a []string
				for _, s := range res.Shards {
					a = append(a, s.Action)
				}
				return strings.Join(a, ",")
			}
			if got := actions(run(0, step("submit")...)); got != "created,created" {
				t.Fatalf("submit: %s", got)
			}
			if got := actions(run(0, step("submit")...)); got != "already_bound,already_bound" {
				t.Fatalf("second submit: %s", got)
			}
			for range 5 {
				if r := h.runEnv(env, step("status")...); r.code == 0 {
					break
				} else if r.code != exitTempFail {
					t.Fatalf("status: %s", r)
				}
			}
			run(0, step("collect")...)
			rep := run(10, "reconcile", "--job", pr.JobKey) // r-001 and r-004 failed retryably: PARTIAL
			var got map[string]any
			if err := json.Unmarshal([]byte(rep.stdout), &got); err != nil {
				t.Fatal(err)
			}
			want := map[string]float64{"expected": 6, "succeeded": 4, "failed_retryable": 2, "failed_permanent": 0, "missing": 0, "unknown": 0, "duplicate": 0, "retry_records": 2}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("report %s = %v, want %v", k, got[k], v)
				}
			}
			filepath.WalkDir(h.lake, func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					if data, _ := os.ReadFile(path); strings.Contains(string(data), p.key) {
						t.Errorf("the key is in the lake: %s", path)
					}
				}
				return nil
			})
		})
	}
}
