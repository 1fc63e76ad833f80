package ingest

import (
	"bytes"
	"fmt"
	"reflect"
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
	shapeMisses.Store(0)
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
