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
	messageNames    = []string{"content", "tool_calls", "refusal"}
	outputNames     = []string{"type", "content"}
	outContentNames = []string{"type", "text", "refusal"}
	embeddingNames  = []string{"embedding"}
	reasonNames     = []string{"reason"}
	bodyErrNames    = []string{"message", "type", "code"}
)

func fastResultLine(line []byte, in *openaiResultLine) bool {
	jm := newMemo(line)
	in.memo = jm
	i := skipSpace(line, 0)
	end, ok := walkObjectAt(jm, line, i, resultNames, func(k int, v []byte, vfl jflags) bool {
		switch k {
		case 0:
			return setString(&in.ID, v, vfl)
		case 1:
			in.CustomID = v
			return true
		case 2:
			if isNull(v) {
				return true
			}
			r := jm.response()
			in.Response = r
			return walkObject(jm, v, responseNames, func(k int, v []byte, vfl jflags) bool {
				switch k {
				case 0:
					if isNull(v) {
						return true
					}
					n, ok := fastInt64(v)
					if !ok || n != int64(int32(n)) {
						return false
					}
					c := int32(n)
					r.StatusCode = &c
					return true
				case 1:
					return setString(&r.RequestID, v, vfl)
				default:
					r.Body = v
					return true
				}
			})
		default:
			if isNull(v) {
				return true
			}
			e := &openaiLineErr{}
			in.Error = e
			return walkObject(jm, v, lineErrNames, func(k int, v []byte, vfl jflags) bool {
				if k == 0 {
					e.Code = v
					return true
				}
				return setString(&e.Message, v, vfl)
			})
		}
	})
	return ok && skipSpace(line, end) == len(line)
}

func fastBody(jm *jmemo, raw []byte, b *openaiBody) bool {
	if !jm.holds(raw) {
		jm = newMemo(raw)
		jm.noParts = true // released before b is done with
		defer jm.release()
	}
	i := skipSpace(raw, 0)
	end, ok := walkObjectAt(jm, raw, i, bodyNames, func(k int, v []byte, vfl jflags) bool {
		switch k {
		case 0:
			return setCommon(&b.Object, v, vfl, &lastObject)
		case 1:
			return setCommon(&b.Model, v, vfl, &lastModel)
		case 2:
			return setCommon(&b.Status, v, vfl, &lastStatus)
		case 3:
			if isNull(v) {
				return true
			}
			d := &openaiIncomplete{}
			b.IncompleteDetails = d
			return walkObject(jm, v, reasonNames, func(_ int, v []byte, vfl jflags) bool { return setString(&d.Reason, v, vfl) })
		case 4:
			if isNull(v) {
				return true
			}
			b.Usage = jm.usage()
			return fastUsage(jm, v, b.Usage)
		case 5:
			return eachObject(jm, v, func(o []byte) bool {
				if b.Choices == nil {
					b.Choices = jm.choices()
				}
				b.Choices = append(b.Choices, openaiChoice{})
				return fastChoice(jm, o, &b.Choices[len(b.Choices)-1])
			}, func() { b.Choices = []openaiChoice{} })
		case 6:
			return eachObject(jm, v, func(o []byte) bool {
				b.Output = append(b.Output, openaiOutput{})
				out := &b.Output[len(b.Output)-1]
				return walkObject(jm, o, outputNames, func(k int, v []byte, vfl jflags) bool {
					if k == 0 {
						return setString(&out.Type, v, vfl)
					}
					return eachObject(jm, v, func(o []byte) bool {
						out.Content = append(out.Content, openaiOutputContent{})
						c := &out.Content[len(out.Content)-1]
						return walkObject(jm, o, outContentNames, func(k int, v []byte, vfl jflags) bool {
							switch k {
							case 0:
								return setString(&c.Type, v, vfl)
							case 1:
								return setString(&c.Text, v, vfl)
							default:
								return setString(&c.Refusal, v, vfl)
							}
						})
					}, func() { out.Content = []openaiOutputContent{} })
				})
			}, func() { b.Output = []openaiOutput{} })
		case 7:
			return eachObject(jm, v, func(o []byte) bool {
				b.Data = append(b.Data, openaiEmbedding{})
				d := &b.Data[len(b.Data)-1]
				return walkObject(jm, o, embeddingNames, func(_ int, v []byte, _ jflags) bool {
					d.Embedding = v
					return true
				})
			}, func() { b.Data = []openaiEmbedding{} })
		case 8:
			return eachRaw(jm, v, &b.Results)
		default:
			if isNull(v) {
				return true
			}
			e := &openaiBodyErr{}
			b.Error = e
			return walkObject(jm, v, bodyErrNames, func(k int, v []byte, vfl jflags) bool {
				switch k {
				case 0:
					return setString(&e.Message, v, vfl)
				case 1:
					return setString(&e.Type, v, vfl)
				default:
					e.Code = v
					return true
				}
			})
		}
	})
	return ok && skipSpace(raw, end) == len(raw)
}

func fastUsage(jm *jmemo, v []byte, u *openaiUsage) bool {
	cache := func(dst **openaiCacheDetails, v []byte) bool {
		if isNull(v) {
			return true
		}
		d := jm.cacheDetails()
		*dst = d
		return walkObject(jm, v, cacheNames, func(k int, v []byte, _ jflags) bool {
			if k == 0 {
				return setInt64(&d.CachedTokens, v)
			}
			return setInt64(&d.CacheWriteTokens, v)
		})
	}
	reasoning := func(dst **openaiReasoningDetails, v []byte) bool {
		if isNull(v) {
			return true
		}
		d := jm.reasoningDetails()
		*dst = d
		return walkObject(jm, v, reasoningNames, func(_ int, v []byte, _ jflags) bool { return setInt64(&d.ReasoningTokens, v) })
	}
	return walkObject(jm, v, usageNames, func(k int, v []byte, _ jflags) bool {
		switch k {
		case 0:
			return setInt64(&u.PromptTokens, v)
		case 1:
			return setInt64(&u.CompletionTokens, v)
		case 2:
			return setInt64(&u.InputTokens, v)
		case 3:
			return setInt64(&u.OutputTokens, v)
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

func fastChoice(jm *jmemo, v []byte, c *openaiChoice) bool {
	return walkObject(jm, v, choiceNames, func(k int, v []byte, vfl jflags) bool {
		switch k {
		case 0:
			if isNull(v) {
				return true
			}
			m := jm.message()
			c.Message = m
			return walkObject(jm, v, messageNames, func(k int, v []byte, vfl jflags) bool {
				switch k {
				case 0:
					m.Content = v
					return true
				case 1:
					return eachRaw(jm, v, &m.ToolCalls)
				default:
					return setStringPtr(&m.Refusal, v, vfl)
				}
			})
		case 1:
			return setStringPtr(&c.Text, v, vfl)
		default:
			return setCommon(&c.FinishReason, v, vfl, &lastFinishReason)
		}
	})
}

// eachObject decodes an array of objects (null: nil slice, [] : empty()).
// A null element, which encoding/json leaves as a zero value, fails.
func eachObject(jm *jmemo, v []byte, fn func(o []byte) bool, empty func()) bool {
	if isNull(v) {
		return true
	}
	if len(v) == 0 || v[0] != '[' {
		return false
	}
	n := 0
	var fl jflags
	_, ok := eachElement(jm, v, 0, 0, func(el []byte, _ jflags) bool {
		n++
		return len(el) > 0 && el[0] == '{' && fn(el)
	}, &fl)
	if ok && n == 0 {
		empty()
	}
	return ok
}

// eachRaw decodes an array into []json.RawMessage.
func eachRaw(jm *jmemo, v []byte, dst *[]json.RawMessage) bool {
	if isNull(v) {
		return true
	}
	if len(v) == 0 || v[0] != '[' {
		return false
	}
	out := []json.RawMessage{}
	var fl jflags
	_, ok := eachElement(jm, v, 0, 0, func(el []byte, _ jflags) bool {
		out = append(out, el)
		return true
	}, &fl)
	*dst = out
	return ok
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
func plainString(raw []byte) (string, bool) {
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
	return string(body), true
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
