package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/bench/gen"
	"github.com/batchlake/batchlake/lake"
)

// The fast JSON paths must agree with encoding/json on every line: same
// record or row, same error. ParseInput and ParseResult are the entry
// points (the fast path, falling back to encoding/json where it declines);
// generalParseInput and generalParseResult are encoding/json alone.

func parseInputBoth(t testing.TB, line []byte, keyField string) {
	t.Helper()
	f := openaiFormat{}
	fast, ferr := f.ParseInput(line, keyField)
	slow, serr := generalParseInput(line, keyField)
	if fmt.Sprint(ferr) != fmt.Sprint(serr) || !reflect.DeepEqual(fast, slow) {
		t.Fatalf("ParseInput(%q, %q):\nfast %+v %v\nslow %+v %v", line, keyField, fast, ferr, slow, serr)
	}
	// With the request digest left to the caller, the digest of the call it
	// leaves is the same, and so is the rest of the record.
	later, call, lerr := f.parseInputLater(line, keyField)
	if call.Body != nil {
		later.RequestDigest = lake.HashCall(call.Method, call.URL, call.Body)
	}
	if fmt.Sprint(lerr) != fmt.Sprint(serr) || !reflect.DeepEqual(later, slow) {
		t.Fatalf("parseInputLater(%q, %q):\nlater %+v %v\nslow %+v %v", line, keyField, later, lerr, slow, serr)
	}
}

// generalParseResult is ParseResult with encoding/json alone.
func generalParseResult(line []byte) (lake.AttemptRow, error) {
	var in openaiResultLine
	if err := generalResultLine(line, &in); err != nil {
		return lake.AttemptRow{}, err
	}
	return openaiRow(&in, generalBody)
}

func parseResultBoth(t testing.TB, line []byte) {
	t.Helper()
	f := openaiFormat{}
	fast, ferr := f.ParseResult(line, ChannelOutput)
	slow, serr := generalParseResult(line)
	if fmt.Sprint(ferr) != fmt.Sprint(serr) || !reflect.DeepEqual(fast, slow) {
		t.Fatalf("ParseResult(%q):\nfast %+v %v\nslow %+v %v", line, fast, ferr, slow, serr)
	}
	// Both rows read a message's content with plainString where it can: it
	// must say what json.Unmarshal says.
	var in openaiResultLine
	var b openaiBody
	if generalResultLine(line, &in) != nil || in.Response == nil || generalBody(nil, in.Response.Body, &b) != nil {
		return
	}
	for _, c := range b.Choices {
		if c.Message == nil {
			continue
		}
		if got, ok := plainString(c.Message.Content); ok {
			if want, wok := contentString(c.Message.Content); !wok || got != want {
				t.Fatalf("plainString(%s) = %q, json.Unmarshal gives %q (ok %v)", c.Message.Content, got, want, wok)
			}
		}
	}
}

var inputSeeds = []string{
	// White space only inside the body's values: the fast path once hashed
	// this body uncompacted, a request digest the slow path does not give.
	`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role": "user","content":"x"}]}}`,
	`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"temperature":0.2,"max_tokens":256}}`,
	`  {"custom_id" : "a" , "method":"POST","url":"/v1/chat/completions","body":{ "model" : "gpt-4o", "messages" : [ ], "response_format": {"type":"json_schema","json_schema":{"b":1,"a":[1, 2,{"z":null,"y":true}]}} } }  `,
	`{"custom_id":"a","method":"POST","url":"/v1/responses","body":{"model":"gpt-4o","input":"caf\u00e9 \"q\" é","metadata":{"k":"v"},"top_p":1e-3,"n":-0}}`,
	`{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"model":"text-embedding-3-small","input":["x","y"],"dimensions":256}}`,
	`{"custom_id":"a","Method":"POST","method":"POST","url":"/v1/chat/completions","body":{"model":"m"}}`,
	`{"custom_id":"a","method":"POST","method":"GET","url":"/v1/chat/completions","body":{"model":"m"}}`,
	`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","model":"n"}}`,
	`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","x":{"a":1,"a":2}}}`,
	`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","stop":"\n"}}`,
	`{"custom_id":"é","method":"POST","url":"/v1/chat/completions","body":{"model":"m"}}`,
	`{"custom_id":"a\u0001","method":"POST","url":"/v1/chat/completions","body":{"model":"m"}}`,
	`{"custom_id":"","method":"POST","url":"/v1/chat/completions","body":{"model":"m"}}`,
	`{"custom_id":7,"method":"POST","url":"/v1/chat/completions","body":{"model":"m"}}`,
	`{"custom_id":"a","method":"POST","url":"/v1/nope","body":{"model":"m"}}`,
	`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":""}}`,
	`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":null}}`,
	`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":null}`,
	`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":[1]}`,
	`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m"}} x`,
	`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m",}}`,
	`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","t":01}}`,
	`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","t":1.}}`,
	`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","t":"\x"}}`,
	`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":"` + "\xff" + `"}}`,
	`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","metadata":{"\u00e9":1}}}`,
	`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","Messages":[1]}}`,
	`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","extra":{"k":[1,2]},"body":{"model":"m"}}`,
	`[1,2]`, `null`, `"x"`, `{`, ``, `{}`,
	strings.Repeat("[", 300) + strings.Repeat("]", 300),
}

var resultSeeds = []string{
	`{"id": "batch_req_1", "custom_id": "a", "response": {"status_code": 200, "request_id": "req_1", "body": {"id": "c", "object": "chat.completion", "model": "gpt-4o-mini-2024-07-18", "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello\nworld \u00e9 \"q\"", "refusal": null}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 2}, "completion_tokens_details": {"reasoning_tokens": 1}}}}, "error": null}`,
	`{"id":"r","custom_id":"a","response":{"status_code":200,"body":{"object":"chat.completion","choices":[{"message":{"content":null,"tool_calls":[{"id":"t"},null]},"finish_reason":"tool_calls"},{"message":null}]}},"error":null}`,
	`{"id":"r","custom_id":"a","response":{"status_code":200,"body":{"object":"chat.completion","choices":[{"message":{"content":"","refusal":"no"},"finish_reason":"stop"}]}},"error":null}`,
	`{"id":"r","custom_id":"a","response":{"status_code":200,"body":{"object":"chat.completion","choices":[{"message":{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}},"finish_reason":"function_call"}]}},"error":null}`,
	`{"id":"r","custom_id":"a","response":{"status_code":200,"body":{"object":"chat.completion","choices":[{"message":{"role":"assistant","content":"hi","function_call":null},"finish_reason":"stop"}]}},"error":null}`,
	`{"id":"r","custom_id":"a","response":{"status_code":200,"body":{"object":"chat.completion","choices":[{"message":{"content":[{"type":"text","text":"a"},{"text":"b"}]}}]}},"error":null}`,
	`{"id":"r","custom_id":"a","response":{"status_code":200,"body":{"object":"text_completion","choices":[{"text":"abc","finish_reason":"length"}]}},"error":null}`,
	`{"id":"r","custom_id":"a","response":{"status_code":200,"body":{"object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"reasoning"},{"type":"message","content":[{"type":"output_text","text":"x"},{"type":"refusal","refusal":"no"}]},{"type":"function_call"}],"usage":{"input_tokens":3,"output_tokens":4,"input_tokens_details":{"cached_tokens":1},"output_tokens_details":{"reasoning_tokens":2}}}},"error":null}`,
	`{"id":"r","custom_id":"a","response":{"status_code":200,"body":{"object":"list","data":[{"embedding":[0.1,0.2]}],"usage":{"prompt_tokens":3}}},"error":null}`,
	`{"id":"r","custom_id":"a","response":{"status_code":200,"body":{"results":[{"flagged":false}]}},"error":null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": 500, "request_id": "q", "body": {"error": {"message": "oops", "type": "server_error", "param": null, "code": null}}}, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": null, "error": {"code": "batch_expired", "message": "expired"}}`,
	`{"id": "r", "custom_id": "a", "response": null, "error": {"code": 42, "message": "n"}}`,
	`{"id": "r", "custom_id": "a", "response": null, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": null}, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": 2e2, "body": null}, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": 99999999999}, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": 200, "body": {"usage": {"prompt_tokens": 1.5}}}, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": 200, "body": {"usage": {"prompt_tokens": 1, "prompt_tokens_details": {"cached_tokens": 5}}}}, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": 200, "body": {"usage": {"prompt_tokens": -1}}}, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": 200, "body": {"Model": "x", "model": "y"}}, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": 200, "body": {"model": "x", "model": "y"}}, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": 200, "body": {"choices": {}}}, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": 200, "body": {"choices": [null]}}, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": 200, "body": "text"}, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": 200, "body": {"choices": [{"message": {"content": "\ud83d\ude00 \ud83d"}}]}}, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": 200, "body": {"choices": [{"message": {"content": "` + "bad \xff utf8" + `"}}]}}, "error": null}`,
	`{"id": 5, "custom_id": "a", "response": null, "error": {"code": "x"}}`,
	`{"id": "r", "custom_id": null, "response": null, "error": {"code": "x"}}`,
	`{"id": "r", "custom_id": "", "response": null, "error": {"code": "x"}}`,
	`{"id": "r", "custom_id": "caf\u00e9", "response": null, "error": {"code": "x"}}`,
	`{"id": "r", "CUSTOM_ID": "b", "custom_id": "a", "response": null, "error": {"code": "x"}}`,
	// Keys that extend a known name, are a prefix of one, or spell one with an escape.
	`{"id": "r", "custom_id": "a", "response": {"status_code": 200, "body": {"models": "x", "mode": "y", "mod\u0065l": "z", "choices": [{"message": {"content": "plain"}}]}}, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": 200, "body": {"model": "x", "mod\u0065l": "z"}}, "error": null}`,
	// A body the fast path declines after part of it is decoded, in a line it takes.
	`{"id": "r", "custom_id": "a", "response": {"status_code": 200, "body": {"model": "x", "usage": {"prompt_tokens": 3}, "choices": [{"message": {"content": "c"}}], "Object": "y"}}, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": 200, "body": {"model": "x", "deep": ` + strings.Repeat("[", 250) + strings.Repeat("]", 250) + `}}, "error": null}`,
	// The line's id stands for a missing request_id, whatever its spelling.
	`{"id": "caf\u00e9", "custom_id": "a", "response": {"status_code": 200, "body": {"model": "x"}}, "error": null}`,
	`{"id": "", "custom_id": "a", "response": {"status_code": 200, "body": {"model": "x"}}, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": 200, "request_id": "", "body": {"model": "x"}}, "error": null}`,
	`{"id": null, "custom_id": "a", "response": {"status_code": 200, "body": {"model": "x"}}, "error": null}`,
	// Status codes outside the table of common ones.
	`{"id": "r", "custom_id": "a", "response": {"status_code": 700, "body": null}, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": -1, "body": null}, "error": null}`,
	`{"id": "r", "custom_id": "a", "response": {"status_code": 599, "body": null}, "error": null}`,
	`{"id": "batch_req_1", "custom_`,
	`<html><body>502</body></html>`,
	`{"id": "r", "custom_id": "a", "response": null, "error": {"code": "x"}} trailing`,
}

// walk matches a known name by its bytes before it scans the key, which is
// exactly scanString's verdict only for names without a quote, backslash,
// control or non-ASCII byte, and exactly encoding/json's only if no two
// names of a list differ in case alone.
func TestWalkNames(t *testing.T) {
	checkWalkNames(t, [][]string{resultNames, responseNames, lineErrNames, bodyNames, usageNames, cacheNames, reasoningNames,
		choiceNames, messageNames, outputNames, outContentNames, embeddingNames, reasonNames, bodyErrNames, inputNames})
}

func checkWalkNames(t *testing.T, lists [][]string) {
	t.Helper()
	for _, names := range lists {
		if len(names) > 64 {
			t.Errorf("%q: more names than walk's 64-bit set of seen keys", names)
		}
		for i, n := range names {
			if n == "" || strings.ContainsAny(n, "\"\\") {
				t.Errorf("%q: name %q", names, n)
			}
			for _, c := range []byte(n) {
				if c < 0x20 || c >= 0x80 {
					t.Errorf("%q: name %q has byte %#x", names, n, c)
				}
			}
			for _, m := range names[:i] {
				if strings.EqualFold(n, m) {
					t.Errorf("%q: %q and %q differ in case alone", names, n, m)
				}
			}
		}
	}
}

// generated lines: the benchmark generator's input, output and error files.
func generated(t testing.TB, n int64) (in, out, errs [][]byte) {
	var bi, bo, be bytes.Buffer
	if _, err := gen.Generate(context.Background(), gen.Writers{Input: &bi, Output: &bo, Errors: &be}, gen.DefaultOptions(n, 3)); err != nil {
		t.Fatal(err)
	}
	split := func(b []byte) [][]byte { return bytes.Split(bytes.TrimSpace(b), []byte{'\n'}) }
	return split(bi.Bytes()), split(bo.Bytes()), split(be.Bytes())
}

func TestFastJSONAgrees(t *testing.T) {
	for _, s := range inputSeeds {
		parseInputBoth(t, []byte(s), "")
		parseInputBoth(t, []byte(s), "body.model")
	}
	for _, s := range resultSeeds {
		parseResultBoth(t, []byte(s))
	}
	// Backwards too: a line's memo lends its decoded parts to the next line
	// parsed, so each line follows a different one (nothing may carry over).
	for i := len(resultSeeds) - 1; i >= 0; i-- {
		parseResultBoth(t, []byte(resultSeeds[i]))
	}
	in, out, errs := generated(t, 2000)
	for _, l := range in {
		parseInputBoth(t, l, "")
	}
	for _, l := range append(out, errs...) {
		parseResultBoth(t, l)
	}
}

// The fast paths must take the generated lines (else they measure nothing).
func TestFastJSONTakesCommonLines(t *testing.T) {
	in, out, _ := generated(t, 200)
	for _, l := range in {
		if _, ok := fastParseInput(l, "", nil); !ok {
			t.Fatalf("fast path refused %s", l)
		}
	}
	for _, l := range out {
		var r openaiResultLine
		if json := l; len(json) > 0 && json[0] == '{' && bytes.Contains(l, []byte(`"custom_id": "bench-`)) && !fastResultLine(l, &r) {
			t.Fatalf("fast path refused %s", l)
		}
	}
}

func FuzzParseInputFast(f *testing.F) {
	for _, s := range inputSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		parseInputBoth(t, line, "")
	})
}

func FuzzParseResultFast(f *testing.F) {
	for _, s := range resultSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		parseResultBoth(t, line)
	})
}

// scanStringBytes is scanString without the eight-byte skip: the oracle for
// TestScanStringWords.
func scanStringBytes(b []byte, i int) (int, jflags) {
	var fl jflags
	for i++; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, fl
		case c == '\\':
			fl |= jEscape
			if i+1 >= len(b) {
				return -1, fl
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+5 >= len(b) {
					return -1, fl
				}
				for k := 2; k <= 5; k++ {
					if !isHex(b[i+k]) {
						return -1, fl
					}
				}
				i += 6
			default:
				return -1, fl
			}
		case c < 0x20:
			return -1, fl
		case c >= 0x80:
			fl |= jHigh
			i++
		default:
			i++
		}
	}
	return -1, fl
}

// TestScanStringWords puts each kind of byte the eight-byte skip must stop
// at (or flag) at every position of strings up to 40 bytes long, with and
// without a closing quote, and compares scanString with the byte-at-a-time
// oracle.
func TestScanStringWords(t *testing.T) {
	specials := []string{`"`, `\"`, `\\`, `\n`, `\u00e9`, `\x`, "\x00", "\x1f", "\x7f", "\x80", "é", "\xff", " ", "~"}
	n := 0
	for size := 0; size <= 40; size++ {
		for pos := 0; pos <= size; pos++ {
			for _, sp := range specials {
				for _, tail := range []string{`"`, `","x":1}`, ``} {
					s := `"` + strings.Repeat("a", pos) + sp + strings.Repeat("b", size-pos) + tail
					gotEnd, gotFl := scanString([]byte(s), 0)
					wantEnd, wantFl := scanStringBytes([]byte(s), 0)
					if gotEnd != wantEnd || (wantEnd >= 0 && gotFl != wantFl) {
						t.Fatalf("scanString(%q) = %d, %b; want %d, %b", s, gotEnd, gotFl, wantEnd, wantFl)
					}
					n++
				}
			}
		}
	}
	t.Logf("%d strings agree", n)
}

func TestTextJoin(t *testing.T) {
	for _, parts := range [][]string{nil, {""}, {"a"}, {"", "a"}, {"a", ""}, {"a", "b"}, {"a", "", "b", "c"}, {"", "", "xyz", "", "w"}} {
		var j textJoin
		for _, p := range parts {
			j.add(p)
		}
		want := strings.Join(parts, "")
		if got := j.String(); got != want || j.Len() != len(want) {
			t.Errorf("%q: got %q (len %d), want %q", parts, got, j.Len(), want)
		}
	}
}

// A line whose configuration members are the bytes of the line before takes
// that line's configuration without rendering its own; every line here
// follows one that shares or nearly shares its members, and must still
// decode as encoding/json does.
func TestInputConfigCarriesOver(t *testing.T) {
	const head = `{"custom_id":"%s","method":"POST","url":"%s","body":{`
	line := func(id, url, body string) []byte { return []byte(fmt.Sprintf(head, id, url) + body + `}}`) }
	chat := "/v1/chat/completions"
	cases := []struct {
		name string
		line []byte
		// same: the configuration hash of the case before (else another),
		// as encoding/json reads them.
		same bool
		// takes: the fast path reads the line (else encoding/json decides).
		takes bool
	}{
		{"first", line("a", chat, `"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":256,"temperature":0.2`), false, true},
		{"same members, other content", line("b", chat, `"model":"gpt-4o","messages":[{"role":"user","content":"bye"}],"max_tokens":256,"temperature":0.2`), true, true},
		{"content first", line("c", chat, `"messages":[],"model":"gpt-4o","max_tokens":256,"temperature":0.2`), true, true},
		{"members in another order", line("d", chat, `"temperature":0.2,"model":"gpt-4o","messages":[],"max_tokens":256`), true, true},
		{"white space in a value", line("e", chat, `"temperature":0.2,"model":"gpt-4o","messages":[],"max_tokens": 256,"stop":[ "x" ]`), false, true},
		{"the same, compact", line("f", chat, `"temperature":0.2,"model":"gpt-4o","messages":[],"max_tokens":256,"stop":["x"]`), true, true},
		{"a member fewer", line("f2", chat, `"temperature":0.2,"model":"gpt-4o","messages":[],"max_tokens":256`), false, true},
		{"a member more", line("f3", chat, `"temperature":0.2,"model":"gpt-4o","messages":[],"max_tokens":256,"stop":["x"]`), false, true},
		{"another value", line("g", chat, `"temperature":0.2,"model":"gpt-4o","messages":[],"max_tokens":256,"stop":["y"]`), false, true},
		{"another endpoint", line("h", "/v1/completions", `"temperature":0.2,"model":"gpt-4o","messages":[],"max_tokens":256,"stop":["y"]`), false, true},
		{"a content field twice", line("i", "/v1/completions", `"temperature":0.2,"model":"gpt-4o","messages":[],"messages":[],"max_tokens":256,"stop":["y"]`), true, false},
		{"a member twice", line("j", "/v1/completions", `"temperature":0.2,"model":"gpt-4o","messages":[],"max_tokens":256,"stop":["y"],"stop":["y"]`), true, false},
		{"an escape in the id", line(`k\u00e9`, "/v1/completions", `"temperature":0.2,"model":"gpt-4o","messages":[],"max_tokens":256,"stop":["y"]`), true, false},
		{"an escape in a value", line("l", "/v1/completions", `"temperature":0.2,"model":"gpt-4o","messages":[],"max_tokens":256,"stop":["\n"]`), false, false},
		{"a member key escaped", line("m", "/v1/completions", `"temperature":0.2,"model":"gpt-4o","messages":[],"max_tokens":256,"st\u006fp":["y"]`), false, false},
		{"after a refused line", line("n", "/v1/completions", `"temperature":0.2,"model":"gpt-4o","messages":[],"max_tokens":256,"stop":["y"]`), true, true},
		{"nested members in another order", line("o", chat, `"model":"m","messages":[],"response_format":{"type":"json_schema","json_schema":{"b":1,"a":2}}`), false, true},
		{"nested, as the line before", line("p", chat, `"model":"m","messages":[],"response_format":{"type":"json_schema","json_schema":{"b":1,"a":2}}`), true, true},
		{"nested, sorted", line("q", chat, `"model":"m","messages":[],"response_format":{"json_schema":{"a":2,"b":1},"type":"json_schema"}`), true, true},
	}
	lastOpenAIConfig.Store(nil)
	var before lake.Digest
	var seen bool
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, took := fastParseInput(c.line, "", nil)
			if took != c.takes {
				t.Fatalf("fast path took the line: %v, want %v", took, c.takes)
			}
			// Parsed again after the check above: the configuration is now
			// carried over from the line itself, and must agree as well.
			parseInputBoth(t, c.line, "")
			rec, err := generalParseInput(c.line, "")
			if err != nil {
				if c.takes {
					t.Fatalf("encoding/json refused a line the fast path took: %v", err)
				}
				return
			}
			if seen && (rec.ConfigHash == before) != c.same {
				t.Errorf("configuration hash the same as the line before's: %v, want %v", rec.ConfigHash == before, c.same)
			}
			before, seen = rec.ConfigHash, true
		})
	}
}

// fastInt64 decodes what encoding/json decodes into an int64, and refuses
// what it refuses, on both sides of the short-integer path (19 bytes).
func TestFastInt64(t *testing.T) {
	for _, v := range []string{"0", "-0", "7", "-7", "123", "-123", "999999999999999999", "-99999999999999999",
		"1000000000000000000", "-999999999999999999", "9223372036854775807", "-9223372036854775808",
		"9223372036854775808", "-9223372036854775809", "1.5", "1e3", "-1E3", "null", `"1"`, "-", "true"} {
		var want int64
		werr := json.Unmarshal([]byte(v), &want)
		got, ok := fastInt64([]byte(v))
		if ok != (werr == nil) || (ok && got != want) {
			t.Errorf("fastInt64(%s) = %d, %v; encoding/json: %d, %v", v, got, ok, want, werr)
		}
	}
}

// TestLegacyFunctionCall: a chat answer whose one tool call is the older
// function_call (a request that names functions) has output, as one with
// tool_calls does: it passes the default quality gate instead of being
// retried and paid again for the same answer. function_call null is no call.
func TestLegacyFunctionCall(t *testing.T) {
	f, err := FormatFor("openai")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		line      string
		calls     int32
		hasOutput bool
	}{
		{resultSeeds[3], 1, true},
		{resultSeeds[4], 0, true},
		{`{"id":"r","custom_id":"a","response":{"status_code":200,"body":{"object":"chat.completion","choices":[{"message":{"content":null,"function_call":null},"finish_reason":"stop"}]}},"error":null}`, 0, false},
	} {
		for range 2 { // the second read of a line of a shape seen takes the shape's path
			row, err := f.ParseResult([]byte(c.line), ChannelOutput)
			if err != nil {
				t.Fatalf("%s: %v", c.line, err)
			}
			if row.ToolCalls != c.calls || row.HasOutput != c.hasOutput || row.Outcome != "success" {
				t.Errorf("%s: tool calls %d, has output %v, outcome %s; want %d, %v, success", c.line, row.ToolCalls, row.HasOutput, row.Outcome, c.calls, c.hasOutput)
			}
		}
	}
}
