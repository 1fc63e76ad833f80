package ingest

import (
	"encoding/json"
	"sync/atomic"
	"unicode/utf8"
)

// Fast decoders of OpenAI result lines into the same structs encoding/json
// fills (see fastjson.go for the rules). Each returns false when it is not
// sure to do exactly what json.Unmarshal would; the caller then uses
// json.Unmarshal. RawMessage fields alias the input line.

var (
	resultNames     = []string{"id", "custom_id", "response", "error"}
	responseNames   = []string{"status_code", "request_id", "body"}
	lineErrNames    = []string{"code", "message"}
	bodyNames       = []string{"object", "model", "status", "incomplete_details", "usage", "choices", "output", "data", "results", "error"}
	usageNames      = []string{"prompt_tokens", "completion_tokens", "input_tokens", "output_tokens", "prompt_tokens_details", "input_tokens_details", "completion_tokens_details", "output_tokens_details"}
	cacheNames      = []string{"cached_tokens", "cache_write_tokens"}
	reasoningNames  = []string{"reasoning_tokens"}
	choiceNames     = []string{"message", "text", "finish_reason"}
	messageNames    = []string{"content", "tool_calls", "refusal", "function_call"}
	outputNames     = []string{"type", "content"}
	outContentNames = []string{"type", "text", "refusal"}
	embeddingNames  = []string{"embedding"}
	reasonNames     = []string{"reason"}
	bodyErrNames    = []string{"message", "type", "code"}
)

func fastResultLine(line []byte, in *openaiResultLine) bool {
	jm := newMemo(line)
	in.memo = jm
	end, ok := walk(jval{line, skipSpace(line, 0), 0}, resultNames, func(k int, v jval) (int, bool) {
		switch k {
		case 0:
			return idAt(v, in)
		case 1:
			return rawAt(v, (*[]byte)(&in.CustomID))
		case 2:
			if end, ok := v.null(); ok {
				return end, true
			}
			r := jm.response()
			in.Response = r
			return walk(v, responseNames, func(k int, v jval) (int, bool) {
				switch k {
				case 0:
					return statusAt(v, r)
				case 1:
					return requestIDAt(jm, v, r)
				default:
					return responseBody(jm, v, r)
				}
			})
		default:
			return ptrAt(v, &in.Error, func(v jval, e *openaiLineErr) (int, bool) {
				return walk(v, lineErrNames, func(k int, v jval) (int, bool) {
					if k == 0 {
						return rawAt(v, (*[]byte)(&e.Code))
					}
					return strAt(v, &e.Message)
				})
			})
		}
	})
	return ok && skipSpace(line, end) == len(line)
}

// The decoders of a result line's fields that take more than a helper
// below: the walk above and a line's shape (openai_shape.go) both use them.

// idAt decodes the line's id. It is used only where the response has no
// request_id: a plain string is kept as bytes until then.
func idAt(v jval, in *openaiResultLine) (int, bool) {
	raw, fl, end := v.scan()
	if end >= 0 && raw[0] == '"' && fl&(jEscape|jHigh) == 0 {
		in.plainID = raw[1 : len(raw)-1]
		return end, true
	}
	return end, end >= 0 && setString(&in.ID, raw, fl)
}

// statusAt decodes response.status_code.
func statusAt(v jval, r *openaiResponse) (int, bool) {
	raw, _, end := v.scan()
	if end < 0 || isNull(raw) {
		return end, end >= 0
	}
	n, ok := fastInt64(raw)
	if !ok || n != int64(int32(n)) {
		return -1, false
	}
	if 0 <= n && n < int64(len(statusCodes)) {
		r.StatusCode = &statusCodes[n]
	} else {
		c := int32(n)
		r.StatusCode = &c
	}
	return end, true
}

// requestIDAt decodes response.request_id.
func requestIDAt(jm *jmemo, v jval, r *openaiResponse) (int, bool) {
	raw, fl, end := v.scan()
	if end >= 0 && len(raw) >= 2 && raw[0] == '"' && fl&(jEscape|jHigh) == 0 {
		r.RequestID = jm.str(raw[1 : len(raw)-1])
		return end, true
	}
	return end, end >= 0 && setString(&r.RequestID, raw, fl)
}

// contentAt decodes a message's content: its bytes, and its text where it
// is a plain string.
func contentAt(jm *jmemo, v jval, m *openaiMessage) (int, bool) {
	raw, fl, end := v.scan()
	m.Content = raw
	if end >= 0 && raw[0] == '"' && fl&(jEscape|jHigh) == 0 {
		m.text, m.plain = jm.str(raw[1:len(raw)-1]), true
	}
	return end, end >= 0
}

// statusCodes[n] is n: a line's status code points into it (a row's
// status code is never written through its pointer), which spares each line
// allocating one.
var statusCodes = func() (s [600]int32) {
	for i := range s {
		s[i] = int32(i)
	}
	return s
}()

// responseBody decodes the response body at v as fastBody does, into
// r.decoded, as the line is read; where the fast path declines, r.Body is
// the body's bytes for decodeBody alone.
func responseBody(jm *jmemo, v jval, r *openaiResponse) (int, bool) {
	if v.i < len(v.b) && v.b[v.i] == '{' {
		b := jm.body()
		if end, ok := bodyAt(jm, v, b); ok {
			r.Body, r.decoded = v.b[v.i:end], b
			return end, true
		}
	}
	return rawAt(v, (*[]byte)(&r.Body))
}

// fastBody decodes a response body on its own (not read with its line).
func fastBody(jm *jmemo, raw []byte, b *openaiBody) bool {
	if !jm.holds(raw) {
		jm = newMemo(raw)
		jm.noParts = true // released before b is done with
		defer jm.release()
	}
	end, ok := bodyAt(jm, jval{raw, skipSpace(raw, 0), 0}, b)
	return ok && skipSpace(raw, end) == len(raw)
}

// bodyAt decodes the response body at v into b, as json.Unmarshal would.
func bodyAt(jm *jmemo, v jval, b *openaiBody) (int, bool) {
	return walk(v, bodyNames, func(k int, v jval) (int, bool) {
		switch k {
		case 0:
			return commonAt(v, &b.Object, &lastObject)
		case 1:
			return commonAt(v, &b.Model, &lastModel)
		case 2:
			return commonAt(v, &b.Status, &lastStatus)
		case 3:
			return ptrAt(v, &b.IncompleteDetails, func(v jval, d *openaiIncomplete) (int, bool) {
				return walk(v, reasonNames, func(_ int, v jval) (int, bool) { return strAt(v, &d.Reason) })
			})
		case 4:
			if end, ok := v.null(); ok {
				return end, true
			}
			b.Usage = jm.usage()
			return usageAt(jm, v, b.Usage)
		case 5:
			return objectsAt(v, func(o jval) (int, bool) {
				if b.Choices == nil {
					b.Choices = jm.choices()
				}
				b.Choices = append(b.Choices, openaiChoice{})
				return choiceAt(jm, o, &b.Choices[len(b.Choices)-1])
			}, func() { b.Choices = []openaiChoice{} })
		case 6:
			return objectsAt(v, func(o jval) (int, bool) {
				b.Output = append(b.Output, openaiOutput{})
				out := &b.Output[len(b.Output)-1]
				return walk(o, outputNames, func(k int, v jval) (int, bool) {
					if k == 0 {
						return strAt(v, &out.Type)
					}
					return objectsAt(v, func(o jval) (int, bool) {
						out.Content = append(out.Content, openaiOutputContent{})
						c := &out.Content[len(out.Content)-1]
						return walk(o, outContentNames, func(k int, v jval) (int, bool) {
							switch k {
							case 0:
								return strAt(v, &c.Type)
							case 1:
								return strAt(v, &c.Text)
							default:
								return strAt(v, &c.Refusal)
							}
						})
					}, func() { out.Content = []openaiOutputContent{} })
				})
			}, func() { b.Output = []openaiOutput{} })
		case 7:
			return objectsAt(v, func(o jval) (int, bool) {
				b.Data = append(b.Data, openaiEmbedding{})
				d := &b.Data[len(b.Data)-1]
				return walk(o, embeddingNames, func(_ int, v jval) (int, bool) {
					return rawAt(v, (*[]byte)(&d.Embedding))
				})
			}, func() { b.Data = []openaiEmbedding{} })
		case 8:
			return rawsAt(v, &b.Results)
		default:
			return ptrAt(v, &b.Error, func(v jval, e *openaiBodyErr) (int, bool) {
				return walk(v, bodyErrNames, func(k int, v jval) (int, bool) {
					switch k {
					case 0:
						return strAt(v, &e.Message)
					case 1:
						return strAt(v, &e.Type)
					default:
						return rawAt(v, (*[]byte)(&e.Code))
					}
				})
			})
		}
	})
}

func usageAt(jm *jmemo, v jval, u *openaiUsage) (int, bool) {
	cache := func(dst **openaiCacheDetails, v jval) (int, bool) {
		if end, ok := v.null(); ok {
			return end, true
		}
		d := jm.cacheDetails()
		*dst = d
		return walk(v, cacheNames, func(k int, v jval) (int, bool) {
			if k == 0 {
				return int64At(v, &d.CachedTokens)
			}
			return int64At(v, &d.CacheWriteTokens)
		})
	}
	reasoning := func(dst **openaiReasoningDetails, v jval) (int, bool) {
		if end, ok := v.null(); ok {
			return end, true
		}
		d := jm.reasoningDetails()
		*dst = d
		return walk(v, reasoningNames, func(_ int, v jval) (int, bool) { return int64At(v, &d.ReasoningTokens) })
	}
	return walk(v, usageNames, func(k int, v jval) (int, bool) {
		switch k {
		case 0:
			return int64At(v, &u.PromptTokens)
		case 1:
			return int64At(v, &u.CompletionTokens)
		case 2:
			return int64At(v, &u.InputTokens)
		case 3:
			return int64At(v, &u.OutputTokens)
		case 4:
			return cache(&u.PromptTokensDetails, v)
		case 5:
			return cache(&u.InputTokensDetails, v)
		case 6:
			return reasoning(&u.CompletionTokensDetails, v)
		default:
			return reasoning(&u.OutputTokensDetails, v)
		}
	})
}

func choiceAt(jm *jmemo, v jval, c *openaiChoice) (int, bool) {
	return walk(v, choiceNames, func(k int, v jval) (int, bool) {
		switch k {
		case 0:
			if end, ok := v.null(); ok {
				return end, true
			}
			m := jm.message()
			c.Message = m
			return walk(v, messageNames, func(k int, v jval) (int, bool) {
				switch k {
				case 0:
					return contentAt(jm, v, m)
				case 1:
					return rawsAt(v, &m.ToolCalls)
				case 2:
					return strPtrAt(v, &m.Refusal)
				default:
					if end, ok := v.null(); ok {
						return end, true // unset, as the shape path leaves it
					}
					return rawAt(v, (*[]byte)(&m.FunctionCall))
				}
			})
		case 1:
			return strPtrAt(v, &c.Text)
		default:
			return commonAt(v, &c.FinishReason, &lastFinishReason)
		}
	})
}

// objectsAt decodes an array of objects (null: nil slice, [] : empty()).
// A null element, which encoding/json leaves as a zero value, fails.
func objectsAt(v jval, fn func(o jval) (int, bool), empty func()) (int, bool) {
	if end, ok := v.null(); ok {
		return end, true
	}
	end, n, ok := each(v, func(el jval) (int, bool) {
		if el.i >= len(el.b) || el.b[el.i] != '{' {
			return -1, false
		}
		return fn(el)
	})
	if ok && n == 0 {
		empty()
	}
	return end, ok
}

// rawsAt decodes an array into []json.RawMessage.
func rawsAt(v jval, dst *[]json.RawMessage) (int, bool) {
	if end, ok := v.null(); ok {
		return end, true
	}
	out := []json.RawMessage{}
	end, _, ok := each(v, func(el jval) (int, bool) {
		raw, _, end := el.scan()
		out = append(out, raw)
		return end, end >= 0
	})
	*dst = out
	return end, ok
}

// The decoders of one value: each scans it and sets dst as encoding/json
// would, returning the index past it.

func rawAt(v jval, dst *[]byte) (int, bool) {
	raw, _, end := v.scan()
	*dst = raw
	return end, end >= 0
}

func strAt(v jval, dst *string) (int, bool) {
	raw, fl, end := v.scan()
	return end, end >= 0 && setString(dst, raw, fl)
}

func commonAt(v jval, dst *string, last *atomic.Pointer[string]) (int, bool) {
	raw, fl, end := v.scan()
	return end, end >= 0 && setCommon(dst, raw, fl, last)
}

func strPtrAt(v jval, dst **string) (int, bool) {
	raw, fl, end := v.scan()
	return end, end >= 0 && setStringPtr(dst, raw, fl)
}

func int64At(v jval, dst *int64) (int, bool) {
	raw, _, end := v.scan()
	return end, end >= 0 && setInt64(dst, raw)
}

func setString(dst *string, v []byte, vfl jflags) bool {
	s, set, ok := fastString(v, vfl)
	if set {
		*dst = s
	}
	return ok
}

// The last value of the fields most lines of a file share.
var lastObject, lastModel, lastStatus, lastFinishReason atomic.Pointer[string]
var lastAnthropicType, lastAnthropicModel, lastAnthropicStop, lastAnthropicContentType atomic.Pointer[string]

// setCommon is setString for a field whose value most lines share (the
// model, the object type, a status, a finish reason): the string of the
// field's last value is used again instead of a new one allocated.
func setCommon(dst *string, v []byte, vfl jflags, last *atomic.Pointer[string]) bool {
	if len(v) >= 2 && v[0] == '"' && vfl&(jEscape|jHigh) == 0 {
		if p := last.Load(); p != nil && *p == string(v[1:len(v)-1]) {
			*dst = *p
			return true
		}
	}
	if !setString(dst, v, vfl) {
		return false
	}
	if len(v) > 0 && v[0] == '"' {
		s := *dst
		last.Store(&s)
	}
	return true
}

func setStringPtr(dst **string, v []byte, vfl jflags) bool {
	if isNull(v) {
		return true
	}
	s, _, ok := fastString(v, vfl)
	if ok {
		*dst = &s
	}
	return ok
}

func setInt64(dst *int64, v []byte) bool {
	if isNull(v) {
		return true
	}
	n, ok := fastInt64(v)
	*dst = n
	return ok
}

// plainString is the value of a JSON string without escapes in valid UTF-8,
// or "" for null: what json.Unmarshal into a string gives, fast.
func plainString(raw []byte) (string, bool) { return (*jmemo)(nil).plainString(raw) }

// plainString is plainString with the string carved from the memo's block
// (str).
func (m *jmemo) plainString(raw []byte) (string, bool) {
	if isNull(raw) {
		return "", true
	}
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	for _, c := range body {
		if c == '\\' || c == '"' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(body) {
		return "", false
	}
	return m.str(body), true
}

// contentString is json.Unmarshal of raw into a string.
func contentString(raw []byte) (string, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// openaiParts are the parts of a decoded OpenAI result line that the fast
// decoders would otherwise allocate one by one: a line's memo lends them,
// and they are reused with it. Nothing of them outlives the line's parse
// (the attempt row holds strings, and its status code is allocated apart).
type openaiParts struct {
	response                     openaiResponse
	body                         openaiBody
	usage                        openaiUsage
	choice                       [1]openaiChoice
	cache                        [2]openaiCacheDetails
	reasoning                    [2]openaiReasoningDetails
	message                      [1]openaiMessage
	nCache, nReasoning, nMessage int
}

// lends reports whether m may lend its parts.
func (m *jmemo) lends() bool { return m != nil && !m.noParts }

func (m *jmemo) response() *openaiResponse {
	if !m.lends() {
		return new(openaiResponse)
	}
	return reset(&m.oa.response)
}

// body is the decoded response body of the line.
func (m *jmemo) body() *openaiBody {
	if !m.lends() {
		return new(openaiBody)
	}
	return reset(&m.oa.body)
}

func (m *jmemo) usage() *openaiUsage {
	if !m.lends() {
		return new(openaiUsage)
	}
	return reset(&m.oa.usage)
}

// choices is an empty slice with room for one choice.
func (m *jmemo) choices() []openaiChoice {
	if !m.lends() {
		return nil
	}
	return m.oa.choice[:0:1]
}

func (m *jmemo) cacheDetails() *openaiCacheDetails {
	if !m.lends() {
		return new(openaiCacheDetails)
	}
	return lendNext(m.oa.cache[:], &m.oa.nCache)
}

func (m *jmemo) reasoningDetails() *openaiReasoningDetails {
	if !m.lends() {
		return new(openaiReasoningDetails)
	}
	return lendNext(m.oa.reasoning[:], &m.oa.nReasoning)
}

func (m *jmemo) message() *openaiMessage {
	if !m.lends() {
		return new(openaiMessage)
	}
	return lendNext(m.oa.message[:], &m.oa.nMessage)
}

// lendNext is parts[*n], reset, and counts it lent; a new T once all are.
func lendNext[T any](parts []T, n *int) *T {
	if *n == len(parts) {
		return new(T)
	}
	*n++
	return reset(&parts[*n-1])
}

// reset sets *p to T's zero value and returns p.
func reset[T any](p *T) *T {
	var zero T
	*p = zero
	return p
}
