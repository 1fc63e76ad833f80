package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/batchlake/batchlake/errkind"
)

// notUTF8 refuses a request line that is not valid UTF-8, naming the field
// and the byte where it stops being so; nil for a valid line. JSON between
// systems must be UTF-8 (RFC 8259). Go's JSON decoders, the planner's own
// included, read such bytes as U+FFFD while the shard keeps them as they
// are, so the provider would be sent bytes it may refuse, with the whole
// file or batch request they came in, or read as another request than the
// one whose digest the lake keeps.
func notUTF8(line []byte) *errkind.InputError {
	if utf8.Valid(line) {
		return nil
	}
	at := 0
	for at < len(line) {
		r, n := utf8.DecodeRune(line[at:])
		if r == utf8.RuneError && n == 1 {
			break
		}
		at += n
	}
	return &errkind.InputError{Field: fieldAt(line, at), Msg: fmt.Sprintf("not valid UTF-8 at byte %d of the line", at+1)}
}

// fieldAt names the member of the JSON line whose key or string value holds
// byte at (body.messages[0].content), or "" when the line cannot be read so
// far. Outside strings such a byte would not be JSON at all.
func fieldAt(line []byte, at int) string {
	type frame struct {
		obj, wantKey bool
		key          string
		idx          int
	}
	var stack []frame
	path := func() string {
		var b strings.Builder
		for i, f := range stack {
			if !f.obj {
				b.WriteString("[" + strconv.Itoa(f.idx) + "]")
				continue
			}
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		}
		return b.String()
	}
	valueDone := func() {
		if n := len(stack); n > 0 {
			if t := &stack[n-1]; t.obj {
				t.wantKey = true
			} else {
				t.idx++
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		past := dec.InputOffset() > int64(at)
		if s, ok := tok.(string); ok && len(stack) > 0 && stack[len(stack)-1].obj && stack[len(stack)-1].wantKey {
			stack[len(stack)-1].key, stack[len(stack)-1].wantKey = s, false
			if past {
				return path()
			}
			continue
		}
		if past {
			return path()
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{obj: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}
