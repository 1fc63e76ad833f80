package gen

import "strconv"

// kind is what the provider did with one request (or what one result line says).
type kind uint8

const (
	kindOK         kind = iota // 200 with content
	kindEmpty                  // 200 with empty or null content: fails the quality gate
	kind500                    // 500 server_error: retryable
	kind429                    // 429 rate_limit_exceeded: retryable
	kindExpired                // error line batch_expired: retryable
	kind400                    // 400 invalid_request_error: permanent
	kindMissing                // no line at all
	kindUnknownOK              // a success line for an id that was never sent
	kindUnknownExp             // an expired line for an id that was never sent
	kindTorn                   // a line cut short: not JSON
	kindHTML                   // a gateway error page: not JSON
)

// Outcome is a record's reconciled outcome (docs/contract.md), in precedence order.
type Outcome uint8

// Outcomes, best first: a record with several result lines takes the smallest.
const (
	Succeeded Outcome = iota
	QualityFailed
	FailedRetryable
	FailedPermanent
	Missing
)

// outcomeOf is the outcome a single result line of kind k gives its record.
func outcomeOf(k kind) Outcome {
	switch k {
	case kindOK:
		return Succeeded
	case kindEmpty:
		return QualityFailed
	case kind500, kind429, kindExpired:
		return FailedRetryable
	case kind400:
		return FailedPermanent
	}
	return Missing
}

// errorChannel reports whether a line of kind k belongs in the error file.
func errorChannel(k kind) bool {
	switch k {
	case kind500, kind429, kindExpired, kind400, kindUnknownExp:
		return true
	}
	return false
}

const (
	defaultModel        = "gpt-4o-mini"
	defaultModelVersion = "gpt-4o-mini-2024-07-18"
	createdBase         = 1767225600 // 2026-01-01T00:00:00Z
)

const hexDigits = "0123456789abcdef"

func appendHex(dst []byte, r *rng, n int) []byte {
	for n > 0 {
		v := r.next()
		for i := 0; i < 16 && n > 0; i++ {
			dst = append(dst, hexDigits[v&15])
			v >>= 4
			n--
		}
	}
	return dst
}

// appendCustomID appends prefix + i as ten zero-padded digits.
func appendCustomID(dst []byte, prefix string, i uint64) []byte {
	dst = append(dst, prefix...)
	var d [20]byte
	s := strconv.AppendUint(d[:0], i, 10)
	for k := len(s); k < 10; k++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

const systemPrompt = "You are a support analyst. Summarise the customer ticket below in two sentences, name the product area and rate the customer's sentiment from 1 to 5."

// userBytes is the length of record i's user message, fixed by seed and i so
// that the output side can derive token counts without reading the input.
func userBytes(seed, i uint64) int {
	return 200 + int(mix(mix(seed, streamLine), i)%150)
}

// appendInput appends record i's request line (compact JSON, as most tools
// write it), without the line end.
func appendInput(dst []byte, o *Options, i uint64) []byte {
	r := newRNG(o.Seed, streamLine, i)
	dst = append(dst, `{"custom_id":"`...)
	dst = appendCustomID(dst, o.IDPrefix, i)
	dst = append(dst, `","method":"POST","url":"/v1/chat/completions","body":{"model":"`...)
	dst = append(dst, o.Model...)
	dst = append(dst, `","messages":[{"role":"system","content":"`...)
	dst = append(dst, systemPrompt...)
	dst = append(dst, `"},{"role":"user","content":"Ticket `...)
	dst = strconv.AppendUint(dst, 100000+i, 10)
	dst = append(dst, `: `...)
	dst = appendText(dst, &r, userBytes(o.Seed, i))
	dst = append(dst, `."}],"max_tokens":256,"temperature":0.2}}`...)
	return dst
}

// appendResult appends one result line of kind k for the request with id
// prefix+i (OpenAI's own files use Python's separators, ", " and ": "). The
// bytes depend only on (seed, i, k), so a repeated line is identical.
func appendResult(dst []byte, o *Options, i uint64, k kind, prefix string) []byte {
	r := newRNG(mix(o.Seed, uint64(k)), streamLine, i)
	switch k {
	case kindTorn:
		// A write cut short before the id: no record can be named from it.
		dst = append(dst, `{"id": "batch_req_`...)
		dst = appendHex(dst, &r, 24)
		return append(dst, `", "custom_`...)
	case kindHTML:
		return append(dst, `<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center></body></html>`...)
	}
	dst = append(dst, `{"id": "batch_req_`...)
	dst = appendHex(dst, &r, 24)
	dst = append(dst, `", "custom_id": "`...)
	dst = appendCustomID(dst, prefix, i)
	dst = append(dst, `", "response": `...)
	switch k {
	case kindExpired, kindUnknownExp:
		return append(dst, `null, "error": {"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}}`...)
	case kind500:
		dst = appendResponseHead(dst, &r, 500)
		dst = append(dst, `{"error": {"message": "The server had an error while processing your request. Sorry about that!", "type": "server_error", "param": null, "code": null}}}, "error": null}`...)
		return dst
	case kind429:
		dst = appendResponseHead(dst, &r, 429)
		dst = append(dst, `{"error": {"message": "Rate limit reached for `...)
		dst = append(dst, o.Model...)
		dst = append(dst, ` in organization org-bench on tokens per min (TPM): Limit 2000000, Used 1999412, Requested `...)
		dst = strconv.AppendInt(dst, int64(400+r.intn(400)), 10)
		dst = append(dst, `. Please try again in `...)
		dst = strconv.AppendInt(dst, int64(20+r.intn(900)), 10)
		dst = append(dst, `ms. Visit https://platform.openai.com/account/rate-limits to learn more.", "type": "tokens", "param": null, "code": "rate_limit_exceeded"}}}, "error": null}`...)
		return dst
	case kind400:
		dst = appendResponseHead(dst, &r, 400)
		dst = append(dst, `{"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in `...)
		dst = strconv.AppendInt(dst, int64(128001+r.intn(20000)), 10)
		dst = append(dst, ` tokens. Please reduce the length of the messages.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}}, "error": null}`...)
		return dst
	}
	// kindOK, kindEmpty, kindUnknownOK: a chat completion.
	prompt := int64(userBytes(o.Seed, i)+len(systemPrompt))/4 + 24
	dst = appendResponseHead(dst, &r, 200)
	dst = append(dst, `{"id": "chatcmpl-`...)
	dst = appendHex(dst, &r, 29)
	dst = append(dst, `", "object": "chat.completion", "created": `...)
	dst = strconv.AppendUint(dst, createdBase+i%86400, 10)
	dst = append(dst, `, "model": "`...)
	dst = append(dst, o.ModelVersion...)
	dst = append(dst, `", "choices": [{"index": 0, "message": {"role": "assistant", "content": `...)
	var completion int64
	finish := "stop"
	switch {
	case k == kindEmpty && i%2 == 0:
		dst = append(dst, `""`...)
		completion = 1
	case k == kindEmpty:
		dst = append(dst, `null`...)
		finish = "content_filter"
	default:
		n := 60 + r.intn(120)
		dst = append(dst, '"')
		start := len(dst)
		dst = appendText(dst, &r, n)
		completion = int64(len(dst)-start)/4 + 1
		dst = append(dst, `."`...)
	}
	dst = append(dst, `, "refusal": null}, "logprobs": null, "finish_reason": "`...)
	dst = append(dst, finish...)
	dst = append(dst, `"}], "usage": {"prompt_tokens": `...)
	dst = strconv.AppendInt(dst, prompt, 10)
	dst = append(dst, `, "completion_tokens": `...)
	dst = strconv.AppendInt(dst, completion, 10)
	dst = append(dst, `, "total_tokens": `...)
	dst = strconv.AppendInt(dst, prompt+completion, 10)
	dst = append(dst, `, "prompt_tokens_details": {"cached_tokens": `...)
	var cached int64
	if r.intn(4) == 0 { // a quarter of requests hit the prompt cache (64-token steps)
		cached = prompt / 64 * 64
	}
	dst = strconv.AppendInt(dst, cached, 10)
	dst = append(dst, `}, "completion_tokens_details": {"reasoning_tokens": 0}}, "system_fingerprint": "fp_`...)
	dst = appendHex(dst, &r, 10)
	return append(dst, `"}}, "error": null}`...)
}

func appendResponseHead(dst []byte, r *rng, status int) []byte {
	dst = append(dst, `{"status_code": `...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, `, "request_id": "req_`...)
	dst = appendHex(dst, r, 32)
	return append(dst, `", "body": `...)
}
