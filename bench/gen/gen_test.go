package gen

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

type files struct{ in, out, errs bytes.Buffer }

func generate(t *testing.T, o Options) (*files, Truth) {
	t.Helper()
	var f files
	truth, err := Generate(context.Background(), Writers{&f.in, &f.out, &f.errs}, o)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return &f, truth
}

// recount classifies the generated files from scratch, the way docs/contract.md
// defines the report, sharing no code with the generator.
func recount(t *testing.T, f *files) Truth {
	t.Helper()
	var got Truth
	expected := map[string]bool{}
	models := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(f.in.Bytes()))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var in struct {
			CustomID string `json:"custom_id"`
			Method   string `json:"method"`
			URL      string `json:"url"`
			Body     struct {
				Model    string `json:"model"`
				Messages []struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"messages"`
			} `json:"body"`
		}
		if err := json.Unmarshal(sc.Bytes(), &in); err != nil {
			t.Fatalf("input line %d: %v", n, err)
		}
		if in.CustomID == "" || expected[in.CustomID] {
			t.Fatalf("input line %d: custom_id %q empty or repeated", n, in.CustomID)
		}
		if in.Method != "POST" || in.URL != "/v1/chat/completions" || len(in.Body.Messages) != 2 {
			t.Fatalf("input line %d: not a chat completion request: %s", n, sc.Bytes())
		}
		expected[in.CustomID] = true
		models[in.Body.Model] = true
		got.Lines.Input++
		got.Bytes.Input += int64(len(sc.Bytes())) + 1
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(models) != 1 {
		t.Errorf("input uses %d models, want one", len(models))
	}
	got.Expected = int64(len(expected))

	best := map[string]Outcome{}
	lines := map[string]int{}
	unknown := map[string]bool{}
	retryableCodes := map[string]bool{"batch_expired": true, "batch_cancelled": true, "rate_limit_exceeded": true, "server_error": true, "timeout": true}
	for _, ch := range []struct {
		name  string
		data  []byte
		lines *int64
		bytes *int64
	}{{"output", f.out.Bytes(), &got.Lines.Output, &got.Bytes.Output}, {"errors", f.errs.Bytes(), &got.Lines.Errors, &got.Bytes.Errors}} {
		sc := bufio.NewScanner(bytes.NewReader(ch.data))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			*ch.lines++
			*ch.bytes += int64(len(sc.Bytes())) + 1
			var l struct {
				CustomID string `json:"custom_id"`
				Response *struct {
					StatusCode int `json:"status_code"`
					Body       struct {
						Choices []struct {
							Message struct {
								Content   *string           `json:"content"`
								ToolCalls []json.RawMessage `json:"tool_calls"`
							} `json:"message"`
						} `json:"choices"`
						Usage *struct {
							PromptTokens        int64 `json:"prompt_tokens"`
							PromptTokensDetails struct {
								CachedTokens int64 `json:"cached_tokens"`
							} `json:"prompt_tokens_details"`
						} `json:"usage"`
					} `json:"body"`
				} `json:"response"`
				Error *struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				got.Quarantined++
				continue
			}
			var o Outcome
			switch r := l.Response; {
			case l.Error != nil:
				o = FailedPermanent
				if retryableCodes[l.Error.Code] {
					o = FailedRetryable
				}
				if ch.name != "errors" {
					t.Errorf("%s line %d: an error line outside the error file", ch.name, n)
				}
			case r == nil:
				t.Fatalf("%s line %d: neither response nor error", ch.name, n)
			case r.StatusCode >= 200 && r.StatusCode < 300:
				o = QualityFailed
				if c := r.Body.Choices; len(c) > 0 && ((c[0].Message.Content != nil && *c[0].Message.Content != "") || len(c[0].Message.ToolCalls) > 0) {
					o = Succeeded
				}
				if u := r.Body.Usage; u == nil || u.PromptTokensDetails.CachedTokens > u.PromptTokens {
					t.Errorf("%s line %d: bad usage", ch.name, n)
				}
			case r.StatusCode == 408 || r.StatusCode == 429 || r.StatusCode >= 500:
				o = FailedRetryable
			default:
				o = FailedPermanent
			}
			if !expected[l.CustomID] {
				unknown[l.CustomID] = true
				continue
			}
			lines[l.CustomID]++
			if prev, ok := best[l.CustomID]; !ok || o < prev {
				best[l.CustomID] = o
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	for id := range expected {
		o, ok := best[id]
		if !ok {
			o = Missing
		}
		switch o {
		case Succeeded:
			got.Succeeded++
		case QualityFailed:
			got.QualityFailed++
		case FailedRetryable:
			got.FailedRetryable++
		case FailedPermanent:
			got.FailedPermanent++
		case Missing:
			got.Missing++
		}
		if lines[id] > 1 {
			got.Duplicate++
		}
	}
	got.Unknown = int64(len(unknown))
	got.RetryRecords = got.Missing + got.FailedRetryable + got.QualityFailed
	got.Closed = got.Missing == 0 && got.Unknown == 0 && got.Duplicate == 0
	return got
}

func TestTruthMatchesRecount(t *testing.T) {
	high := Rates{ServerError: 0.05, RateLimit: 0.05, Expired: 0.05, BadRequest: 0.05, Missing: 0.05, Empty: 0.05, Duplicate: 0.2}
	cases := []struct {
		name string
		opts func(*Options)
	}{
		{"default rates", func(o *Options) { o.N = 20_000; o.Block = 1024 }},
		{"high rates, ragged last block", func(o *Options) { o.N = 3001; o.Block = 256; o.Rates = high; o.Unknown = 7; o.Corrupt = 5 }},
		{"one record", func(o *Options) { o.N = 1; o.Unknown = 2 }},
		{"clean", func(o *Options) { o.N = 500; o.Rates = Rates{}; o.Unknown = 0; o.Corrupt = 0 }},
		{"one worker", func(o *Options) { o.N = 2000; o.Block = 100; o.Rates = high; o.Workers = 1 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := DefaultOptions(0, 42)
			c.opts(&o)
			f, truth := generate(t, o)
			got := recount(t, f)
			// Fields the recount does not derive.
			got.Generator, got.N, got.Seed, got.Rates = truth.Generator, truth.N, truth.Seed, truth.Rates
			if got != truth {
				gj, _ := json.Marshal(got)
				tj, _ := json.Marshal(truth)
				t.Errorf("truth differs from recount\ntruth:   %s\nrecount: %s", tj, gj)
			}
			if truth.Expected != o.N || truth.Unknown != int64(o.Unknown) || truth.Quarantined != int64(o.Corrupt) {
				t.Errorf("expected/unknown/quarantined = %d/%d/%d, want %d/%d/%d", truth.Expected, truth.Unknown, truth.Quarantined, o.N, o.Unknown, o.Corrupt)
			}
		})
	}
}

// Every defect appears at the default rates, at a size a test can afford.
func TestDefaultRatesShowEveryDefect(t *testing.T) {
	_, truth := generate(t, DefaultOptions(20_000, 7))
	for name, n := range map[string]int64{
		"succeeded": truth.Succeeded, "quality_failed": truth.QualityFailed, "failed_retryable": truth.FailedRetryable,
		"failed_permanent": truth.FailedPermanent, "missing": truth.Missing, "unknown": truth.Unknown,
		"duplicate": truth.Duplicate, "quarantined": truth.Quarantined,
	} {
		if n == 0 {
			t.Errorf("%s = 0", name)
		}
	}
}

func TestDeterministic(t *testing.T) {
	sum := func(o Options) [3][32]byte {
		f, _ := generate(t, o)
		return [3][32]byte{sha256.Sum256(f.in.Bytes()), sha256.Sum256(f.out.Bytes()), sha256.Sum256(f.errs.Bytes())}
	}
	o := DefaultOptions(5000, 3)
	o.Block = 300
	o.Workers = 1
	a := sum(o)
	o.Workers = 4
	if b := sum(o); a != b {
		t.Error("bytes depend on the number of workers")
	}
	o.Seed = 4
	if c := sum(o); c[0] == a[0] || c[1] == a[1] {
		t.Error("another seed gave the same files")
	}
}

// The result files are not in input order, and the lines have the sizes the
// benchmark promises.
func TestShuffledAndSized(t *testing.T) {
	o := DefaultOptions(20_000, 5)
	o.Block = 512
	f, truth := generate(t, o)
	if avg := truth.Bytes.Input / truth.Lines.Input; avg < 600 || avg > 700 {
		t.Errorf("input lines average %d bytes, want about 650", avg)
	}
	if avg := truth.Bytes.Output / truth.Lines.Output; avg < 750 || avg > 850 {
		t.Errorf("output lines average %d bytes, want about 800", avg)
	}
	var ids []string
	for _, l := range strings.Split(strings.TrimSpace(f.out.String()), "\n") {
		var v struct {
			CustomID string `json:"custom_id"`
		}
		if json.Unmarshal([]byte(l), &v) == nil {
			ids = append(ids, v.CustomID)
		}
	}
	ascending := 0
	for i := 1; i < len(ids); i++ {
		if ids[i] > ids[i-1] {
			ascending++
		}
	}
	if frac := float64(ascending) / float64(len(ids)); frac > 0.6 {
		t.Errorf("%.0f%% of adjacent output lines are in input order: not shuffled", frac*100)
	}
}

func TestOptionsRejected(t *testing.T) {
	for name, mut := range map[string]func(*Options){
		"zero n":        func(o *Options) { o.N = 0 },
		"zero block":    func(o *Options) { o.Block = 0 },
		"rates over 1":  func(o *Options) { o.Rates.Missing = 0.7; o.Rates.Empty = 0.7 },
		"negative rate": func(o *Options) { o.Rates.Duplicate = -1 },
		"no prefix":     func(o *Options) { o.IDPrefix = "" },
	} {
		t.Run(name, func(t *testing.T) {
			o := DefaultOptions(10, 1)
			mut(&o)
			if _, err := Generate(context.Background(), Writers{io.Discard, io.Discard, io.Discard}, o); err == nil {
				t.Error("Generate accepted bad options")
			}
		})
	}
}

type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("disk full")
	}
	f.n--
	return len(p), nil
}

// A failing writer stops the pipeline with its error instead of hanging it.
func TestWriteErrorStops(t *testing.T) {
	o := DefaultOptions(50_000, 1)
	o.Block = 100
	_, err := Generate(context.Background(), Writers{io.Discard, &failAfter{n: 3}, io.Discard}, o)
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("err = %v, want the writer's error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Generate(ctx, Writers{io.Discard, io.Discard, io.Discard}, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestPermuteIsBijection(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 5, 16, 17, 100, 1000, 4097} {
		seen := make([]bool, n)
		for x := uint64(0); x < n; x++ {
			p := permute(x, n, 99)
			if p >= n || seen[p] {
				t.Fatalf("n=%d: permute(%d) = %d repeats or is out of range", n, x, p)
			}
			seen[p] = true
		}
	}
}
