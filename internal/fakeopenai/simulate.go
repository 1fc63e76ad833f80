package fakeopenai

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Rates are the probabilities of each defect, per request.
type Rates struct {
	ServerError float64 // 500 server_error (retryable)
	RateLimit   float64 // 429 rate_limit_exceeded (retryable)
	BadRequest  float64 // 400 invalid_request_error (permanent)
	Expired     float64 // batch_expired error line (retryable)
	Missing     float64 // no line at all
	Empty       float64 // 200 with empty content (fails the quality gate)
	Duplicate   float64 // the success line twice
	Unknown     int     // lines with ids that were never sent, per batch
}

// DefaultRates make a first attempt visibly imperfect.
var DefaultRates = Rates{ServerError: 0.04, RateLimit: 0.03, BadRequest: 0.02, Expired: 0.02, Missing: 0.03, Empty: 0.02, Duplicate: 0.01, Unknown: 1}

// RetryRates are used for retried records (attempt > 1): rarer trouble, no
// duplicates or unknown ids, so a demo converges.
var RetryRates = Rates{ServerError: 0.05, RateLimit: 0.03, BadRequest: 0.02, Expired: 0.0, Missing: 0.03, Empty: 0.02}

type inputLine struct {
	CustomID string          `json:"custom_id"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// Result is what a simulated batch produced.
type Result struct {
	Output, Errors []byte
	Completed      int64
	Failed         int64
	Total          int64
}

// Simulate runs a batch over an OpenAI-format input file: the lines it
// answers, with the defects rates asks for. The same input, seed and rates
// always give the same bytes.
func Simulate(input []byte, seed uint64, rates Rates) (Result, error) {
	return SimulateBatch(input, seed, rates, "")
}

// SimulateBatch is Simulate for the batch named batchID: the same answers and
// defects, but the line and request ids are the batch's own, as OpenAI's are
// unique to each request it serves (batch_req_…, req_…). Two batches of the
// same input file, two jobs' first attempts planned from one provider file,
// then never give byte-identical result files.
func SimulateBatch(input []byte, seed uint64, rates Rates, batchID string) (Result, error) {
	ids := func(kind, customID string) uint64 {
		if batchID == "" {
			return hash(seed, kind, customID)
		}
		return hash(seed, kind, batchID, customID)
	}
	var res Result
	var out, errs [][]byte
	sc := bufio.NewScanner(bytes.NewReader(input))
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var in inputLine
		if err := json.Unmarshal(line, &in); err != nil {
			return res, fmt.Errorf("input line %d: %w", res.Total+1, err)
		}
		res.Total++
		var body struct {
			Model    string `json:"model"`
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
			Input json.RawMessage `json:"input"`
		}
		_ = json.Unmarshal(in.Body, &body)
		promptLen := len(in.Body)
		r := draw(seed, in.CustomID)
		id := fmt.Sprintf("batch_req_%x", ids("req", in.CustomID)%1e12)
		reqID := fmt.Sprintf("req_%x", ids("rid", in.CustomID)%1e12)
		p := int64(promptLen/4 + 8)
		cached := int64(0)
		if hash(seed, "cache", in.CustomID)%4 == 0 {
			cached = p / 2 / 64 * 64
		}
		switch x := r; {
		case x < rates.ServerError:
			errs = append(errs, httpError(id, in.CustomID, reqID, 500, "server_error", "", "The server had an error while processing your request."))
			res.Failed++
		case x < rates.ServerError+rates.RateLimit:
			errs = append(errs, httpError(id, in.CustomID, reqID, 429, "requests", "rate_limit_exceeded", "Rate limit reached for requests."))
			res.Failed++
		case x < rates.ServerError+rates.RateLimit+rates.BadRequest:
			errs = append(errs, httpError(id, in.CustomID, reqID, 400, "invalid_request_error", "context_length_exceeded", "This model's maximum context length was exceeded."))
			res.Failed++
		case x < rates.ServerError+rates.RateLimit+rates.BadRequest+rates.Expired:
			errs = append(errs, mustJSON(map[string]any{"id": id, "custom_id": in.CustomID, "response": nil,
				"error": map[string]any{"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}}))
			res.Failed++
		case x < rates.ServerError+rates.RateLimit+rates.BadRequest+rates.Expired+rates.Missing:
			// no line at all
		default:
			empty := x < rates.ServerError+rates.RateLimit+rates.BadRequest+rates.Expired+rates.Missing+rates.Empty
			text := ""
			if !empty {
				text = answer(seed, in.CustomID)
			}
			l := success(in.URL, id, in.CustomID, reqID, modelVersion(body.Model), text, p, cached)
			out = append(out, l)
			res.Completed++
			if hash(seed, "dup", in.CustomID)%10000 < uint64(rates.Duplicate*10000) {
				out = append(out, l)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return res, fmt.Errorf("reading the input: %w", err)
	}
	for i := 0; i < rates.Unknown; i++ {
		cid := fmt.Sprintf("stray-%d-%x", i, seed)
		id, reqID := "batch_req_stray", "req_stray"
		if batchID != "" {
			id, reqID = fmt.Sprintf("batch_req_%x", ids("req", cid)%1e12), fmt.Sprintf("req_%x", ids("rid", cid)%1e12)
		}
		out = append(out, success("/v1/chat/completions", id, cid, reqID, "gpt-4o-mini-2024-07-18", "stray", 10, 0))
	}
	rng := rand.New(rand.NewPCG(seed, uint64(res.Total)))
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	rng.Shuffle(len(errs), func(i, j int) { errs[i], errs[j] = errs[j], errs[i] })
	res.Output = joinLines(out)
	res.Errors = joinLines(errs)
	return res, nil
}

func joinLines(ls [][]byte) []byte {
	if len(ls) == 0 {
		return nil
	}
	return append(bytes.Join(ls, []byte{'\n'}), '\n')
}

// modelVersion turns an alias into a dated snapshot, as providers do.
func modelVersion(m string) string {
	if m == "" {
		return "gpt-4o-mini-2024-07-18"
	}
	if strings.Count(m, "-") >= 3 && m[len(m)-1] >= '0' && m[len(m)-1] <= '9' {
		return m
	}
	switch m {
	case "gpt-4o-mini":
		return "gpt-4o-mini-2024-07-18"
	case "gpt-4o":
		return "gpt-4o-2024-08-06"
	}
	return m
}

func success(url, id, cid, reqID, model, text string, prompt, cached int64) []byte {
	body := successBody(url, reqID, model, text, prompt, cached)
	return mustJSON(map[string]any{"id": id, "custom_id": cid, "response": map[string]any{"status_code": 200, "request_id": reqID, "body": body}, "error": nil})
}

// Answer is the simulator's real-time answer to one request body sent to
// url (/v1/chat/completions, /v1/responses, /v1/embeddings): the response
// body the endpoint returns with status 200, and its request id. The same
// seed and body give the same answer.
func Answer(seed uint64, url string, reqBody []byte) (body []byte, requestID string) {
	var in struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(reqBody, &in)
	key := string(reqBody)
	reqID := fmt.Sprintf("req_%x", hash(seed, "rt", key)%1e12)
	p := int64(len(reqBody)/4 + 8)
	return mustJSON(successBody(url, reqID, modelVersion(in.Model), answer(seed, key), p, 0)), reqID
}

func successBody(url, reqID, model, text string, prompt, cached int64) map[string]any {
	completion := int64(len(text)/4 + 1)
	if text == "" {
		completion = 1
	}
	var body map[string]any
	switch url {
	case "/v1/responses":
		output := []any{}
		if text != "" {
			output = append(output, map[string]any{"type": "message", "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}})
		}
		body = map[string]any{"id": "resp_" + reqID, "object": "response", "status": "completed", "model": model, "output": output,
			"usage": map[string]any{"input_tokens": prompt, "input_tokens_details": map[string]any{"cached_tokens": cached},
				"output_tokens": completion, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": prompt + completion}}
	case "/v1/embeddings":
		emb := []float64{}
		if text != "" {
			emb = []float64{0.0123, -0.0456, 0.0789}
		}
		body = map[string]any{"object": "list", "model": model, "data": []any{map[string]any{"object": "embedding", "index": 0, "embedding": emb}},
			"usage": map[string]any{"prompt_tokens": prompt, "total_tokens": prompt}}
	default:
		body = map[string]any{"id": "chatcmpl-" + reqID, "object": "chat.completion", "model": model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}},
			"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
				"prompt_tokens_details": map[string]any{"cached_tokens": cached}, "completion_tokens_details": map[string]any{"reasoning_tokens": 0}}}
	}
	return body
}

func httpError(id, cid, reqID string, status int, typ, code, msg string) []byte {
	var c any
	if code != "" {
		c = code
	}
	return mustJSON(map[string]any{"id": id, "custom_id": cid, "error": nil, "response": map[string]any{"status_code": status, "request_id": reqID,
		"body": map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}}}})
}

var words = strings.Fields("the quick brown fox jumps over a lazy dog while seven clever owls sing about rivers mountains and quiet libraries")

func answer(seed uint64, cid string) string {
	h := hash(seed, "answer", cid)
	n := 4 + int(h%12)
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[(h>>uint(i%8*4)+uint64(i))%uint64(len(words))])
	}
	b.WriteByte('.')
	return b.String()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func hash(seed uint64, parts ...string) uint64 {
	h := sha256.New()
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seed)
	h.Write(s[:])
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return binary.BigEndian.Uint64(h.Sum(nil))
}

// draw is a uniform number in [0,1) fixed by seed and custom id.
func draw(seed uint64, cid string) float64 {
	return float64(hash(seed, "draw", cid)>>11) / (1 << 53)
}
