package ingest

// A small JSON scanner for the hot paths (ParseInput, ParseResult). It
// validates exactly the grammar encoding/json accepts and decodes the common
// shape of provider lines without reflection or maps. Anything unusual — a
// key with an escape or a non-ASCII byte, a key that differs from a known
// field only in case (encoding/json would match it), a repeated known key, a
// value of an unexpected type, very deep nesting — makes the fast path give
// up, and the caller falls back to encoding/json, whose results and error
// messages stay the reference. fastjson_test.go checks both paths agree.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
)

// jflags describe a scanned value.
type jflags uint8

const (
	jEscape jflags = 1 << iota // a string in it holds a backslash escape
	jHigh                      // a string in it holds a byte >= 0x80
	jSpace                     // white space between its tokens
)

// maxFastDepth bounds nesting on the fast path (encoding/json allows 10000).
const maxFastDepth = 200

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// scanString scans the string starting at b[i] == '"'; it returns the index
// past the closing quote, or -1 if the string is not valid JSON.
func scanString(b []byte, i int) (int, jflags) {
	var fl jflags
	i++
	for i < len(b) {
		// Eight bytes at a time up to the first quote, backslash or control
		// character: a line's strings are most of its bytes. The lowest
		// flagged byte of the masks is always a true one (a false flag can
		// only follow a true one), so i jumps straight to it.
		for i+8 <= len(b) {
			w := binary.LittleEndian.Uint64(b[i:])
			m := hasZeroByte(w^(ones*'"')) | hasZeroByte(w^(ones*'\\')) | hasByteBelow(w, 0x20)
			if m == 0 {
				if w&(ones*0x80) != 0 {
					fl |= jHigh
				}
				i += 8
				continue
			}
			k := bits.TrailingZeros64(m) &^ 7 // 8 × the first special byte's index
			if w&(ones*0x80)&(1<<k-1) != 0 {
				fl |= jHigh
			}
			i += k >> 3
			break
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, fl
		case c == '\\':
			fl |= jEscape
			i++
			if i >= len(b) {
				return -1, fl
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+4 >= len(b) {
					return -1, fl
				}
				for k := 1; k <= 4; k++ {
					if !isHex(b[i+k]) {
						return -1, fl
					}
				}
				i += 5
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

// ones has a 1 in every byte: ones*c repeats byte c eight times.
const ones = 0x0101010101010101

// hasZeroByte is non-zero if and only if a byte of w is zero (a borrow runs
// upwards only from a zero byte, so there are no false positives without one).
func hasZeroByte(w uint64) uint64 { return (w - ones) & ^w & (ones * 0x80) }

// hasByteBelow is non-zero if and only if a byte of w is below n (n <= 0x80).
func hasByteBelow(w uint64, n byte) uint64 { return (w - ones*uint64(n)) & ^w & (ones * 0x80) }

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scanNumber scans a JSON number at b[i]; -1 if it is not one.
func scanNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return -1
	}
	switch {
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i
}

// scanValue validates the value starting at b[i] (no leading space) and
// returns the index past it, or -1. Objects and arrays that jm remembers
// from an earlier scan of the same line are not scanned again.
func scanValue(jm *jmemo, b []byte, i, depth int) (int, jflags) {
	if i >= len(b) || depth > maxFastDepth {
		return -1, 0
	}
	switch c := b[i]; {
	case c == '"':
		return scanString(b, i)
	case c == '{', c == '[':
		off, k := jm.offset(b, i), -1 // k: this container's memo entry, if any
		if off >= 0 {
			if end, fl, ok := jm.lookup(off); ok {
				return i + end - off, fl
			}
			k = jm.reserve(off)
		}
		var fl jflags
		var j int
		var ok bool
		if c == '{' {
			j, ok = eachMember(jm, b, i, depth, func(_ []byte, kfl jflags, _ []byte, vfl jflags) bool {
				fl |= kfl | vfl
				return true
			}, &fl)
		} else {
			j, ok = eachElement(jm, b, i, depth, func(_ []byte, vfl jflags) bool {
				fl |= vfl
				return true
			}, &fl)
		}
		if !ok {
			return -1, fl
		}
		jm.set(k, off+j-i, fl)
		return j, fl
	case c == 't':
		return literal(b, i, "true"), 0
	case c == 'f':
		return literal(b, i, "false"), 0
	case c == 'n':
		return literal(b, i, "null"), 0
	case c == '-' || isDigit(c):
		return scanNumber(b, i), 0
	}
	return -1, 0
}

func literal(b []byte, i int, lit string) int {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit)
	}
	return -1
}

// eachMember walks the object at b[i] == '{', calling fn with each key (the
// raw bytes between the quotes) and value span; fn returning false stops the
// walk as a failure. It returns the index past the object. White space
// between tokens is added to *fl.
func eachMember(jm *jmemo, b []byte, i, depth int, fn func(key []byte, kfl jflags, v []byte, vfl jflags) bool, fl *jflags) (int, bool) {
	i = space(b, i+1, fl)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return -1, false
		}
		ke, kfl := scanString(b, i)
		if ke < 0 {
			return -1, false
		}
		key := b[i+1 : ke-1]
		j := space(b, ke, fl)
		if j >= len(b) || b[j] != ':' {
			return -1, false
		}
		vs := space(b, j+1, fl)
		ve, vfl := scanValue(jm, b, vs, depth+1)
		if ve < 0 || !fn(key, kfl, b[vs:ve], vfl) {
			return -1, false
		}
		var more, ok bool
		if i, more, ok = afterValue(b, ve, '}', fl); !ok || !more {
			return i, ok
		}
	}
}

// eachElement walks the array at b[i] == '['.
func eachElement(jm *jmemo, b []byte, i, depth int, fn func(v []byte, vfl jflags) bool, fl *jflags) (int, bool) {
	i = space(b, i+1, fl)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		ve, vfl := scanValue(jm, b, i, depth+1)
		if ve < 0 || !fn(b[i:ve], vfl) {
			return -1, false
		}
		var more, ok bool
		if i, more, ok = afterValue(b, ve, ']', fl); !ok || !more {
			return i, ok
		}
	}
}

// space skips white space from i, noting in *fl that there was some.
func space(b []byte, i int, fl *jflags) int {
	j := skipSpace(b, i)
	if j != i {
		*fl |= jSpace
	}
	return j
}

// afterValue steps over what follows a member or element ending at ve: a
// comma (more: i is the next one's start) or the container's end byte (i is
// past it); anything else is malformed (ok false).
func afterValue(b []byte, ve int, end byte, fl *jflags) (i int, more, ok bool) {
	i = space(b, ve, fl)
	if i >= len(b) {
		return -1, false, false
	}
	switch b[i] {
	case ',':
		return space(b, i+1, fl), true, true
	case end:
		return i + 1, false, true
	}
	return -1, false, false
}

func isNull(v []byte) bool { return string(v) == "null" }

// fastString decodes a JSON string value as encoding/json does into a string
// (null leaves it unchanged: ok with set false). Other types fail.
func fastString(v []byte, vfl jflags) (s string, set, ok bool) {
	if isNull(v) {
		return "", false, true
	}
	if len(v) < 2 || v[0] != '"' {
		return "", false, false
	}
	body := v[1 : len(v)-1]
	if vfl&jEscape == 0 && (vfl&jHigh == 0 || utf8.Valid(body)) {
		return string(body), true, true
	}
	if u, ok := unquoteSimple(body); ok {
		return u, true, true
	}
	// Surrogate pairs, invalid UTF-8: encoding/json's own rules. (Into a
	// variable of this branch: Unmarshal's pointer would move s itself to
	// the heap, one allocation every call.)
	var decoded string
	if err := json.Unmarshal(v, &decoded); err != nil {
		return "", false, false
	}
	return decoded, true, true
}

// unquoteSimple decodes escapes other than surrogate \u escapes in valid
// UTF-8; ok is false for anything else.
func unquoteSimple(s []byte) (string, bool) {
	if !utf8.Valid(s) {
		return "", false
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			j := bytes.IndexByte(s[i:], '\\')
			if j < 0 {
				out = append(out, s[i:]...)
				break
			}
			out = append(out, s[i:i+j]...)
			i += j
			continue
		}
		switch s[i+1] {
		case '"', '\\', '/':
			out = append(out, s[i+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, err := strconv.ParseUint(string(s[i+2:i+6]), 16, 32)
			if err != nil || (r >= 0xD800 && r < 0xE000) {
				return "", false
			}
			out = utf8.AppendRune(out, rune(r))
			i += 6
			continue
		default:
			return "", false
		}
		i += 2
	}
	return string(out), true
}

// fastInt64 decodes an integer as encoding/json does into an int64 (null:
// unchanged).
func fastInt64(v []byte) (int64, bool) {
	// Most values are token counts, a few digits read as they stand: fewer
	// than 19 digits cannot overflow an int64. Anything else (a fraction,
	// an exponent, null, a long number) takes the path below.
	if len(v) > 0 && len(v) < 19 {
		i := 0
		if v[0] == '-' {
			i = 1
		}
		var n int64
		j := i
		for ; j < len(v) && isDigit(v[j]); j++ {
			n = n*10 + int64(v[j]-'0')
		}
		if j == len(v) && j > i {
			if i == 1 {
				n = -n
			}
			return n, true
		}
	}
	if isNull(v) {
		return 0, true
	}
	if len(v) == 0 || !(v[0] == '-' || isDigit(v[0])) || bytes.ContainsAny(v, ".eE") {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil
}

// canonicalAppend appends the canonical form (docs/contract.md: sorted keys, no
// insignificant white space, numbers as written) of a validated value that
// holds no escapes and no non-ASCII bytes, exactly as Canonical renders it.
// ok is false for a repeated key in an object (encoding/json keeps the last).
func canonicalAppend(jm *jmemo, dst, v []byte) ([]byte, bool) {
	switch v[0] {
	case '{':
		var ms []jmember
		var fl jflags
		_, ok := eachMember(jm, v, 0, 0, func(key []byte, _ jflags, val []byte, _ jflags) bool {
			ms = append(ms, jmember{key, val})
			return true
		}, &fl)
		if !ok {
			return dst, false
		}
		return appendObject(dst, ms, func(dst, v []byte) ([]byte, bool) { return canonicalAppend(jm, dst, v) })
	case '[':
		dst = append(dst, '[')
		first := true
		var fl jflags
		okAll := true
		_, ok := eachElement(jm, v, 0, 0, func(el []byte, _ jflags) bool {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst, okAll = canonicalAppend(jm, dst, el)
			return okAll
		}, &fl)
		if !ok || !okAll {
			return dst, false
		}
		return append(dst, ']'), true
	}
	return append(dst, v...), true
}

// jmember is an object's member as it stands in a line: its key's bytes
// (between the quotes) and its value's.
type jmember struct{ k, v []byte }

// appendObject appends the object of members ms, sorted by key as
// encoding/json writes a map, each value through val. ok is false for a
// repeated key (encoding/json keeps the last) or a value val refuses. The
// keys are written as they are: the caller has seen that they hold no
// escape or non-ASCII byte, so each is its own encoding.
func appendObject(dst []byte, ms []jmember, val func(dst, v []byte) ([]byte, bool)) ([]byte, bool) {
	slices.SortFunc(ms, func(a, b jmember) int { return bytes.Compare(a.k, b.k) })
	dst = append(dst, '{')
	for i, m := range ms {
		if i > 0 {
			if bytes.Equal(ms[i-1].k, m.k) {
				return dst, false
			}
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, m.k...)
		dst = append(dst, '"', ':')
		var ok bool
		if dst, ok = val(dst, m.v); !ok {
			return dst, false
		}
	}
	return append(dst, '}'), true
}

// compactAppend appends v without white space between tokens, as json.Compact.
func compactAppend(dst, v []byte) []byte {
	inStr, esc := false, false
	start := 0
	for i, c := range v {
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case isSpace(c):
			dst = append(dst, v[start:i]...)
			start = i + 1
		}
	}
	return append(dst, v[start:]...)
}

// A jval is a value at b[i] not scanned yet, at nesting depth: a decoder
// either scans it whole (scan) or descends into it (walk, each), which
// validates it as it goes. The line decoders descend, so each byte of a
// line is scanned once; a decoder that scanned each value whole before it
// descended would scan every nested level's members twice, once in their
// parent's scan and once in their own object's walk.
type jval struct {
	b        []byte
	i, depth int
}

// scan validates the value and returns its bytes, its flags and the index
// past it in b (-1 if it is not valid JSON).
func (v jval) scan() (raw []byte, fl jflags, end int) {
	end, fl = scanValue(nil, v.b, v.i, v.depth)
	if end < 0 {
		return nil, fl, -1
	}
	return v.b[v.i:end], fl, end
}

// null reports whether the value is the literal null (end: the index past it).
func (v jval) null() (end int, ok bool) {
	end = literal(v.b, v.i, "null")
	return end, end >= 0
}

// ptrAt decodes the value v as json.Unmarshal does into a nil pointer
// field: null leaves *dst nil; anything else is decoded by decode into a new
// T that *dst points to.
func ptrAt[T any](v jval, dst **T, decode func(v jval, p *T) (int, bool)) (int, bool) {
	if end, ok := v.null(); ok {
		return end, true
	}
	p := new(T)
	*dst = p
	return decode(v, p)
}

// walk descends into the object v: fn gets the index in names of each known
// key and its value, and returns the index past the value (fn must scan or
// walk it); the values of other keys are scanned and skipped. It returns the
// index past the object. It fails on keys with escapes or non-ASCII bytes,
// on keys that match a name only ignoring case, and on a known key given
// twice (encoding/json's rules there are subtle, so the caller falls back to
// it), and on any value that is not valid JSON.
func walk(v jval, names []string, fn func(k int, v jval) (int, bool)) (int, bool) {
	b, i := v.b, v.i
	if i >= len(b) || b[i] != '{' || v.depth > maxFastDepth {
		return -1, false
	}
	var seen uint64
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return -1, false
		}
		// A known name followed by a quote is the whole key (a name holds
		// no quote, backslash, control or non-ASCII byte): most keys are
		// known, and matching them first spares scanning them.
		k, ke := -1, -1
		for n, name := range names {
			if e := i + 1 + len(name); e < len(b) && b[e] == '"' && string(b[i+1:e]) == name {
				k, ke = n, e+1
				break
			}
		}
		if k < 0 {
			var kfl jflags
			if ke, kfl = scanString(b, i); ke < 0 || kfl != 0 {
				return -1, false
			}
			key := b[i+1 : ke-1]
			for _, name := range names {
				if len(key) == len(name) && bytes.EqualFold(key, []byte(name)) {
					return -1, false
				}
			}
		}
		j := skipSpace(b, ke)
		if j >= len(b) || b[j] != ':' {
			return -1, false
		}
		val := jval{b, skipSpace(b, j+1), v.depth + 1}
		var ve int
		if k >= 0 {
			if seen&(1<<k) != 0 {
				return -1, false
			}
			seen |= 1 << k
			var ok bool
			if ve, ok = fn(k, val); !ok {
				return -1, false
			}
		} else if _, _, ve = val.scan(); ve < 0 {
			return -1, false
		}
		if i = skipSpace(b, ve); i >= len(b) {
			return -1, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1, true
		default:
			return -1, false
		}
	}
}

// each descends into the array v: fn gets each element and returns the
// index past it. It returns the index past the array and how many elements
// it had.
func each(v jval, fn func(el jval) (int, bool)) (end, n int, ok bool) {
	b, i := v.b, v.i
	if i >= len(b) || b[i] != '[' || v.depth > maxFastDepth {
		return -1, 0, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, 0, true
	}
	for {
		ve, ok := fn(jval{b, i, v.depth + 1})
		if !ok {
			return -1, n, false
		}
		n++
		if i = skipSpace(b, ve); i >= len(b) {
			return -1, n, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1, n, true
		default:
			return -1, n, false
		}
	}
}
