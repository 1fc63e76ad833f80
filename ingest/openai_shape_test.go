package ingest

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// walkDecodes reports whether the walk decodes line (and its body with it),
// the lines a shape is learned from.
func walkDecodes(line []byte) bool {
	var in openaiResultLine
	defer in.memo.release()
	if !fastResultLine(line, &in) {
		return false
	}
	r := in.Response
	return r == nil || len(r.Body) == 0 || r.Body[0] != '{' || r.decoded != nil
}

// shapeRow decodes line by s into its attempt row; ok is false where the
// line does not have the shape. What the shape decodes must be what the
// walk decodes, part for part.
func shapeRow(t *testing.T, s *resultShape, line []byte) (row any, err error, ok bool) {
	t.Helper()
	var in, walked openaiResultLine
	defer in.memo.release()
	if !s.decode(line, &in) {
		return nil, nil, false
	}
	if !fastResultLine(line, &walked) {
		t.Fatalf("a shape decodes what the walk declines: %s", line)
	}
	walked.memo.release()
	jm := in.memo
	in.memo, walked.memo = nil, nil
	if !reflect.DeepEqual(in, walked) {
		t.Fatalf("line %s\nby shape %+v\nwalked   %+v", line, in, walked)
	}
	in.memo = jm
	r, err := openaiRow(&in, decodeBody)
	return r, err, true
}

// Every line a shape decodes gives the row encoding/json gives: the
// shapes of the seeds, the generated files and variants of a generated
// answer, each tried on every one of those lines.
func TestShapeDecodesAsReference(t *testing.T) {
	_, out, errs := generated(t, 2000)
	var lines [][]byte
	for _, s := range resultSeeds {
		lines = append(lines, []byte(s))
	}
	lines = append(lines, out...)
	lines = append(lines, errs...)
	lines = append(lines, answerVariants(t, out)...)
	var learned []*resultShape
	for _, l := range lines {
		if !walkDecodes(l) {
			continue
		}
		s, ok := learnShape(l)
		if !ok || containsShape(learned, s) {
			continue
		}
		learned = append(learned, s)
	}
	if len(learned) < 5 {
		t.Fatalf("%d shapes learned, want at least 5", len(learned))
	}
	decoded := 0
	for _, s := range learned {
		for _, l := range lines {
			got, gerr, ok := shapeRow(t, s, l)
			if !ok {
				continue
			}
			decoded++
			want, werr := generalParseResult(l)
			if fmt.Sprint(gerr) != fmt.Sprint(werr) || !reflect.DeepEqual(got, want) {
				t.Fatalf("line %s\nby shape  %+v %v\nreference %+v %v", l, got, gerr, want, werr)
			}
		}
	}
	t.Logf("%d shapes, %d decodes", len(learned), decoded)
}

func containsShape(ss []*resultShape, s *resultShape) bool {
	for _, o := range ss {
		if reflect.DeepEqual(o, s) {
			return true
		}
	}
	return false
}

// answerVariants are a generated answer with one value changed at a time:
// some keep its shape (and must decode as the reference does), some are
// invalid, some have another shape.
func answerVariants(t *testing.T, out [][]byte) [][]byte {
	t.Helper()
	var base string
	for _, l := range out {
		if bytes.Contains(l, []byte(`"status_code": 200`)) && bytes.Contains(l, []byte(`"refusal": null`)) {
			base = string(l)
			break
		}
	}
	if base == "" {
		t.Fatal("no generated answer to vary")
	}
	var vs [][]byte
	vary := func(old, new string) {
		if !strings.Contains(base, old) {
			t.Fatalf("the generated answer has no %s", old)
		}
		vs = append(vs, []byte(strings.Replace(base, old, new, 1)))
	}
	content := base[strings.Index(base, `"content": "`)+len(`"content": `):]
	content = content[:strings.Index(content, `", "refusal"`)+1]
	for _, c := range []string{`"a\nb \u00e9 \"q\""`, `"café"`, `null`, `""`, `5`, `[{"type": "text", "text": "x"}, {"text": "y"}]`,
		`"bad ` + "\xff" + ` utf8"`, "\"raw \x01 control\"", `"\ud83d"`, `{"text": "x"}`} {
		vary(content, c)
	}
	vary(`"refusal": null`, `"refusal": "I cannot"`)
	vary(`"refusal": null`, `"refusal": ""`)
	vary(`"logprobs": null`, `"logprobs": {"content": [1, {"a": null}, "x"]}`)
	vary(`"logprobs": null`, `"logprobs": nul`)
	vary(`"finish_reason": "stop"`, `"finish_reason": "length"`)
	vary(`"finish_reason": "stop"`, `"finish_reason": null`)
	vary(`"status_code": 200`, `"status_code": null`)
	vary(`"status_code": 200`, `"status_code": 2e2`)
	vary(`"status_code": 200`, `"status_code": 99999999999`)
	vary(`"status_code": 200`, `"status_code": "200"`)
	vary(`"model": "gpt-4o-mini-2024-07-18"`, `"model": null`)
	vary(`"model": "gpt-4o-mini-2024-07-18"`, `"model": 5`)
	vary(`"model": "gpt-4o-mini-2024-07-18"`, `"model": "caf\u00e9"`)
	vary(`"object": "chat.completion"`, `"object": "text_completion"`)
	vary(`"role": "assistant"`, `"role": {"x": [true, false, null]}`)
	vary(`"custom_id": "`, `"custom_id": 7, "x": "`)
	vary(`"id": "batch_req_`, `"id": 5, "x": "`)
	vary(`"system_fingerprint": "`, `"system_fingerprint": null, "y": "`)
	for _, k := range []string{"prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens"} {
		i := strings.Index(base, `"`+k+`": `) + len(k) + 4
		n := base[i : i+strings.IndexAny(base[i:], ",}")]
		for _, v := range []string{`"3"`, `1e2`, `-5`, `1.5`, `01`, `99999999999999999999`, `null`} {
			vary(`"`+k+`": `+n, `"`+k+`": `+v)
		}
	}
	vary(`"usage": {`, `"usage": null, "u": {`)
	vary(`, "error": null}`, `, "error": {"code": "x", "message": "m"}}`)
	vary(`, "error": null}`, `, "error": null} `)
	vary(`, "error": null}`, `, "error": null}x`)
	return vs
}

// A shape is learned from the lines a batch's files have, and decodes them.
func TestShapeLearnedAndUsed(t *testing.T) {
	_, out, errs := generated(t, 2000)
	shapes.Store(nil)
	shapeStats.reset()
	t.Cleanup(func() { shapes.Store(nil) })
	for _, l := range append(out, errs...) {
		parseResultBoth(t, l)
	}
	hits := 0
	for _, l := range out {
		var in openaiResultLine
		if shapeDecode(l, &in) {
			hits++
		}
		in.memo.release()
	}
	if hits < len(out)*9/10 {
		t.Fatalf("the shapes learned decode %d of %d generated answers", hits, len(out))
	}
}

// The shape tables name every field of the objects the walk descends
// into, as the walk's names do: a name without an entry makes every shape
// holding it one not kept.
func TestShapeTablesCoverNames(t *testing.T) {
	unfollowed := map[string]bool{
		"response.body.choices": true, // an array: one object, cut out as "response.body.choices.0"
	}
	for path, o := range shapeObjects {
		for _, n := range o.names {
			child := n
			if path != "" {
				child = path + "." + n
			}
			_, scalar := shapeScalars[child]
			_, object := shapeObjects[child]
			if !scalar && !object && !shapeNulls[child] && !unfollowed[child] {
				t.Errorf("%s: no entry in the shape tables", child)
			}
		}
	}
}

func BenchmarkShapeDecode(b *testing.B) {
	_, out := benchLines(b)
	s, ok := learnShape(out[0])
	if !ok {
		b.Fatal("no shape")
	}
	b.SetBytes(totalBytes(out) / int64(len(out)))
	for i := 0; b.Loop(); i++ {
		var in openaiResultLine
		s.decode(out[i%len(out)], &in)
		in.memo.release()
	}
}

// reset forgets what u counted (each test learns its shapes afresh).
func (u *shapeUse) reset() {
	u.hits.Store(0)
	u.fails.Store(0)
	u.off.Store(false)
}

// inputShapeParts reads line by s; ok is false where the line does not have
// the shape. What the shape reads must be what the walk reads.
func inputShapeParts(t *testing.T, s *inputShape, line []byte) (InputRecord, bool, bool) {
	t.Helper()
	jm, wjm := newMemo(line), newMemo(line)
	defer jm.release()
	defer wjm.release()
	var in, walked inputParts
	if !s.read(jm, line, &in) {
		return InputRecord{}, false, false
	}
	if !walked.walk(wjm, line) {
		t.Fatalf("an input shape reads what the walk declines: %s", line)
	}
	if !reflect.DeepEqual(in, walked) {
		t.Fatalf("line %s\nby shape %+v\nwalked   %+v", line, in, walked)
	}
	rec, ok := in.finish(jm, line, "", nil)
	return rec, ok, true
}

// Every request line an input shape reads into a record gives the record
// encoding/json gives: the shapes of the seeds, the generated
// requests and variants of one, each tried on every one of those lines.
func TestInputShapeReadsAsReference(t *testing.T) {
	in, _, _ := generated(t, 2000)
	var lines [][]byte
	for _, s := range inputSeeds {
		lines = append(lines, []byte(s))
	}
	lines = append(lines, in...)
	lines = append(lines, requestVariants(t, string(in[0]))...)
	var learned []*inputShape
	for _, l := range lines {
		jm := newMemo(l)
		var walked inputParts
		if walked.walk(jm, l) {
			if s, ok := learnInputShape(l, &walked); ok && !slices.ContainsFunc(learned, func(o *inputShape) bool { return reflect.DeepEqual(o, s) }) {
				learned = append(learned, s)
			}
		}
		jm.release()
	}
	if len(learned) < 5 {
		t.Fatalf("%d input shapes learned, want at least 5", len(learned))
	}
	read := 0
	for _, s := range learned {
		for _, l := range lines {
			got, ok, has := inputShapeParts(t, s, l)
			if !has {
				continue
			}
			read++
			if !ok {
				continue // left to encoding/json, as the walk's parts are
			}
			want, werr := generalParseInput(l, "")
			if werr != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("line %s\nby shape  %+v (ok %v)\nreference %+v %v", l, got, ok, want, werr)
			}
		}
	}
	t.Logf("%d input shapes, %d reads", len(learned), read)
}

// requestVariants are a generated request with one part changed at a time.
func requestVariants(t *testing.T, base string) [][]byte {
	t.Helper()
	var vs [][]byte
	vary := func(old, new string) {
		if !strings.Contains(base, old) {
			t.Fatalf("the generated request has no %s", old)
		}
		vs = append(vs, []byte(strings.Replace(base, old, new, 1)))
	}
	vary(`"custom_id":"`, `"custom_id":"x\u00e9`)
	vary(`"custom_id":"`, `"custom_id":"`+"\x01")
	vary(`"custom_id":"bench-0000000000"`, `"custom_id":7`)
	vary(`"custom_id":"bench-0000000000"`, `"custom_id":""`)
	vary(`"custom_id":"bench-0000000000"`, `"custom_id":"`+strings.Repeat("k", 600)+`"`)
	vary(`"method":"POST"`, `"method":"GET"`)
	vary(`"method":"POST"`, `"method":null`)
	vary(`"url":"/v1/chat/completions"`, `"url":"/v1/embeddings"`)
	vary(`"url":"/v1/chat/completions"`, `"url":"/v1/nothing"`)
	vary(`"url":"/v1/chat/completions"`, `"url":"\/v1\/chat\/completions"`)
	vary(`"model":"gpt-4o-mini"`, `"model":"gpt-4o"`)
	vary(`"model":"gpt-4o-mini"`, `"model":null`)
	vary(`"model":"gpt-4o-mini"`, `"model":"caf\u00e9"`)
	vary(`"model":"gpt-4o-mini"`, `"model":5`)
	vary(`"max_tokens":256`, `"max_tokens":1e2`)
	vary(`"max_tokens":256`, `"max_tokens":-1`)
	vary(`"max_tokens":256`, `"max_tokens":"256"`)
	vary(`"max_tokens":256`, `"max_tokens":{"a":1}`)
	vary(`"temperature":0.2`, `"temperature":null`)
	vary(`"temperature":0.2`, `"temperature":01`)
	vary(`"role":"system"`, `"role":5`)
	vary(`"role":"system"`, `"role":{"x":1}`)
	vary(`"role":"system"`, `"role":{"x": 1}`)
	vary(`"content":"You are`, `"content":"\n\u00e9 \"q\" You are`)
	vary(`"content":"You are`, `"content":"`+"\xff"+` You are`)
	vary(`"content":"You are`, `"content":"`+"\x02"+` You are`)
	vary(`"messages":[`, `"messages":[{"role":"user","content":"x"},`)
	vary(`{"custom_id"`, `{"extra":[1,{"a":null}],"custom_id"`)
	vary(`{"custom_id"`, `{"Custom_ID":"y","custom_id"`)
	vary(`{"custom_id"`, `{ "custom_id"`)
	vary(`"max_tokens":256`, `"max_tokens":256,"max_tokens":256`)
	vary(`}}`, `}} `)
	vary(`}}`, `}}x`)
	return vs
}

// An input shape is learned from the requests plan reads, and reads them.
func TestInputShapeLearnedAndUsed(t *testing.T) {
	in, _, _ := generated(t, 2000)
	inputShapes.Store(nil)
	inputShapeStats.reset()
	t.Cleanup(func() { inputShapes.Store(nil) })
	for _, l := range in {
		parseInputBoth(t, l, "")
	}
	hits := 0
	for _, l := range in {
		jm := newMemo(l)
		var p inputParts
		if p.byShape(jm, l) {
			hits++
		}
		jm.release()
	}
	if hits < len(in)*9/10 {
		t.Fatalf("the input shapes learned read %d of %d generated requests", hits, len(in))
	}
}

// In a file whose lines take many shapes that differ inside, the attempts
// would cost more than the walk: shapes turn off, and every line still
// decodes as the reference does. In a batch's own files they stay on.
func TestShapesOffWhereTheyDoNotPay(t *testing.T) {
	_, out, _ := generated(t, 2000)
	shapes.Store(nil)
	shapeStats.reset()
	t.Cleanup(func() { shapes.Store(nil); shapeStats.reset() })
	for _, l := range out {
		parseResultBoth(t, l)
	}
	if shapeStats.off.Load() {
		t.Fatal("shapes turned off over the generated answers")
	}
	// Six layouts, an unknown key before the refusal in five of them.
	for i, l := range out {
		if k := i % 6; k > 0 {
			l = []byte(strings.Replace(string(l), `"refusal": `, fmt.Sprintf(`"x%d": null, "refusal": `, k), 1))
		}
		parseResultBoth(t, l)
	}
	if !shapeStats.off.Load() {
		t.Fatalf("shapes still on after %d failed attempts, %d lines read (about)", shapeStats.fails.Load(), shapeStats.hits.Load())
	}
}

// Lines near the generated ones, through the shapes of generated lines:
// every line a shape reads must be read as the scanner and encoding/json
// read it.
func FuzzResultShape(f *testing.F) {
	_, out, errs := generated(f, 60)
	var learned []*resultShape
	for _, l := range append(out, errs...) {
		if s, ok := learnShape(l); ok && walkDecodes(l) && !containsShape(learned, s) {
			learned = append(learned, s)
		}
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, s := range learned {
			got, gerr, ok := shapeRow(t, s, line)
			if !ok {
				continue
			}
			want, werr := generalParseResult(line)
			if fmt.Sprint(gerr) != fmt.Sprint(werr) || !reflect.DeepEqual(got, want) {
				t.Fatalf("line %q\nby shape  %+v %v\nreference %+v %v", line, got, gerr, want, werr)
			}
		}
	})
}

// The same for request lines and input shapes.
func FuzzInputShape(f *testing.F) {
	in, _, _ := generated(f, 60)
	var learned []*inputShape
	for _, l := range append(in, []byte(inputSeeds[2]), []byte(inputSeeds[3])) {
		jm := newMemo(l)
		var walked inputParts
		if walked.walk(jm, l) {
			if s, ok := learnInputShape(l, &walked); ok && !slices.ContainsFunc(learned, func(o *inputShape) bool { return reflect.DeepEqual(o, s) }) {
				learned = append(learned, s)
			}
		}
		jm.release()
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, s := range learned {
			got, ok, has := inputShapeParts(t, s, line)
			if !has || !ok {
				continue
			}
			if want, werr := generalParseInput(line, ""); werr != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("line %q\nby shape  %+v\nreference %+v %v", line, got, want, werr)
			}
		}
	})
}
