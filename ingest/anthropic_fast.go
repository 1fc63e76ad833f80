package ingest

// The fast decoder of Anthropic result lines into the structs encoding/json
// fills (see fastjson.go for the rules): false where it is not sure to do
// exactly what json.Unmarshal would, and the caller uses json.Unmarshal.

var (
	anthropicLineNames    = []string{"custom_id", "result"}
	anthropicResultNames  = []string{"type", "message", "error"}
	anthropicMessageNames = []string{"id", "type", "model", "stop_reason", "content", "usage"}
	anthropicContentNames = []string{"type", "text"}
	anthropicUsageNames   = []string{"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "cache_creation", "server_tool_use"}
	anthropicCacheNames   = []string{"ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"}
	anthropicToolUseNames = []string{"web_search_requests"}
	anthropicErrorNames   = []string{"type", "error", "request_id"}
	anthropicDetailNames  = []string{"type", "message"}
)

func fastAnthropicLine(line []byte, in *anthropicResultLine) bool {
	end, ok := walk(jval{line, skipSpace(line, 0), 0}, anthropicLineNames, func(k int, v jval) (int, bool) {
		if k == 0 {
			return rawAt(v, (*[]byte)(&in.CustomID))
		}
		return ptrAt(v, &in.Result, anthropicResultAt)
	})
	return ok && skipSpace(line, end) == len(line)
}

func anthropicResultAt(v jval, r *anthropicResult) (int, bool) {
	return walk(v, anthropicResultNames, func(k int, v jval) (int, bool) {
		switch k {
		case 0:
			return strAt(v, &r.Type)
		case 1:
			return ptrAt(v, &r.Message, anthropicMessageAt)
		default:
			return ptrAt(v, &r.Error, anthropicErrorAt)
		}
	})
}

// anthropicMessageAt decodes a Messages API response at v into m.
func anthropicMessageAt(v jval, m *anthropicMessage) (int, bool) {
	return walk(v, anthropicMessageNames, func(k int, v jval) (int, bool) {
		switch k {
		case 0:
			return strAt(v, &m.ID)
		case 1:
			return commonAt(v, &m.Type, &lastAnthropicType)
		case 2:
			return commonAt(v, &m.Model, &lastAnthropicModel)
		case 3:
			return commonAt(v, &m.StopReason, &lastAnthropicStop)
		case 4:
			return objectsAt(v, func(o jval) (int, bool) {
				m.Content = append(m.Content, anthropicContent{})
				c := &m.Content[len(m.Content)-1]
				return walk(o, anthropicContentNames, func(k int, v jval) (int, bool) {
					if k == 0 {
						return commonAt(v, &c.Type, &lastAnthropicContentType)
					}
					return strAt(v, &c.Text)
				})
			}, func() { m.Content = []anthropicContent{} })
		default:
			return ptrAt(v, &m.Usage, anthropicUsageAt)
		}
	})
}

func anthropicUsageAt(v jval, u *anthropicUsage) (int, bool) {
	return walk(v, anthropicUsageNames, func(k int, v jval) (int, bool) {
		switch k {
		case 0:
			return int64At(v, &u.InputTokens)
		case 1:
			return int64At(v, &u.OutputTokens)
		case 2:
			return int64At(v, &u.CacheCreationInputTokens)
		case 3:
			return int64At(v, &u.CacheReadInputTokens)
		case 4:
			return ptrAt(v, &u.CacheCreation, func(v jval, c *anthropicCacheCreation) (int, bool) {
				return walk(v, anthropicCacheNames, func(k int, v jval) (int, bool) {
					if k == 0 {
						return int64At(v, &c.Ephemeral5m)
					}
					return int64At(v, &c.Ephemeral1h)
				})
			})
		default:
			return ptrAt(v, &u.ServerToolUse, func(v jval, t *anthropicServerToolUse) (int, bool) {
				return walk(v, anthropicToolUseNames, func(_ int, v jval) (int, bool) {
					return int64At(v, &t.WebSearchRequests)
				})
			})
		}
	})
}

func anthropicErrorAt(v jval, e *anthropicError) (int, bool) {
	return walk(v, anthropicErrorNames, func(k int, v jval) (int, bool) {
		switch k {
		case 0:
			return strAt(v, &e.Type)
		case 1:
			return ptrAt(v, &e.Error, func(v jval, d *anthropicErrorDetail) (int, bool) {
				return walk(v, anthropicDetailNames, func(k int, v jval) (int, bool) {
					if k == 0 {
						return strAt(v, &d.Type)
					}
					return strAt(v, &d.Message)
				})
			})
		default:
			return strAt(v, &e.RequestID)
		}
	})
}
