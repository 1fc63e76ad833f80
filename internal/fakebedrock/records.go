package fakebedrock

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
)

// record is one input record and what the fake makes of it.
type record struct {
	id      string
	input   json.RawMessage
	outcome outcome
}

// outcome is a record's drawn result: code 0 is a success (empty: with no
// text), otherwise an error line with that errorCode.
type outcome struct {
	code   int
	empty  bool
	in     int64
	out    int64
	answer string
}

func (o outcome) class() string {
	switch {
	case o.code == 400:
		return "failed_permanent"
	case o.code != 0:
		return "failed_retryable"
	case o.empty:
		return "quality_failed"
	}
	return "succeeded"
}

func hash(seed uint64, parts ...string) uint64 {
	h := sha256.New()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	for _, p := range parts {
		binary.BigEndian.PutUint64(b[:], uint64(len(p)))
		h.Write(b[:])
		h.Write([]byte(p))
	}
	return binary.BigEndian.Uint64(h.Sum(nil))
}

// draw picks a record's outcome from its id, the seed and the rates.
func draw(seed uint64, r Rates, rec record) outcome {
	u := float64(hash(seed, "outcome", rec.id)>>11) / (1 << 53)
	o := outcome{in: int64(len(rec.input)/4 + 5)}
	switch {
	case u < r.BadRequest:
		o.code = 400
	case u < r.BadRequest+r.Throttled:
		o.code = 429
	case u < r.BadRequest+r.Throttled+r.ServerError:
		o.code = 500
	case u < r.BadRequest+r.Throttled+r.ServerError+r.Empty:
		o.empty = true
		o.out = 1
	default:
		o.out = int64(hash(seed, "out", rec.id)%40) + 3
		o.answer = fmt.Sprintf("fake answer %x", hash(seed, "text", rec.id)%1e6)
	}
	if o.code != 0 {
		o.in = 0
	}
	return o
}

var errorMessages = map[int]string{
	400: "Malformed input request: #: extraneous key [bogus] is not permitted, please reformat your input and try again.",
	429: "Too many requests, please wait before trying again.",
	500: "The system encountered an unexpected error during processing. Try your request again.",
}

// resultLine is the record's line in the .jsonl.out of the job jobArn and
// the input and output tokens it counts for manifest.json.out. A Claude
// answer's message id is the job's own, as Bedrock's (msg_bdrk_…) is unique
// to each invocation.
func (r record) resultLine(jobArn, invocationType, model string) ([]byte, int64, int64) {
	line := map[string]any{"recordId": r.id, "modelInput": r.input}
	o := r.outcome
	if o.code != 0 {
		line["error"] = map[string]any{"errorCode": o.code, "errorMessage": errorMessages[o.code]}
		b, _ := json.Marshal(line)
		return b, 0, 0
	}
	var body map[string]json.RawMessage
	_ = json.Unmarshal(r.input, &body)
	_, anthropic := body["anthropic_version"]
	_, titan := body["inputText"]
	switch {
	case invocationType == "Converse" || !anthropic && !titan:
		content := []map[string]any{}
		if !o.empty {
			content = append(content, map[string]any{"text": o.answer})
		}
		line["modelOutput"] = map[string]any{
			"output":     map[string]any{"message": map[string]any{"role": "assistant", "content": content}},
			"stopReason": "end_turn",
			"usage":      map[string]any{"inputTokens": o.in, "outputTokens": o.out, "totalTokens": o.in + o.out},
			"metrics":    map[string]any{"latencyMs": 100 + o.out},
		}
	case anthropic:
		content := []map[string]any{}
		if !o.empty {
			content = append(content, map[string]any{"type": "text", "text": o.answer})
		}
		line["modelOutput"] = map[string]any{
			"id": fmt.Sprintf("msg_bdrk_%016x", hash(0, "msg", jobArn, r.id)), "type": "message", "role": "assistant",
			"model": anthropicModel(model), "content": content, "stop_reason": "end_turn", "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": o.in, "output_tokens": o.out},
		}
	default:
		line["modelOutput"] = map[string]any{
			"inputTextTokenCount": o.in,
			"results":             []map[string]any{{"tokenCount": o.out, "outputText": o.answer, "completionReason": "FINISH"}},
		}
	}
	b, _ := json.Marshal(line)
	return b, o.in, o.out
}

// anthropicModel is the model name Anthropic's body reports for a Bedrock
// model id: anthropic.claude-3-haiku-20240307-v1:0 → claude-3-haiku-20240307.
func anthropicModel(id string) string {
	id = id[strings.LastIndexByte(id, '.')+1:]
	if i := strings.LastIndex(id, "-v"); i > 0 {
		id = id[:i]
	}
	return id
}
