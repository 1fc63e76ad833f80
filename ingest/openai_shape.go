package ingest

import (
	"encoding/binary"
	"reflect"
	"slices"
	"sync/atomic"
	"unsafe"
)

// Result line shapes. The lines of one batch's output file are written by
// one serializer: the same keys in the same order with the same spacing,
// only the values differ. A shape is such a line with its scalar values cut
// out: the bytes between them (keys, punctuation, white space, the braces
// of every object), and for each value what the walk (openai_fast.go) does
// with it. A line matches a shape when its bytes between values are the
// shape's and each value is what the walk accepts there; it is then decoded
// by comparing those bytes and handing each value to the same decoder the
// walk would (idAt, commonAt, int64At, …), without finding, matching and
// dispatching every key. A matching line is valid JSON exactly when the
// shape's line was (the bytes between values are that line's, and each value
// is validated where it is read), and decodes into what the walk gives it.
//
// A shape is learned from a line the walk decoded, and kept only if the line
// decodes through it into the same attempt row. Lines whose shape holds what
// the shapes do not follow (tool calls, a Responses API output, embeddings,
// several choices) are left to the walk. Where lines take so many shapes
// that more attempts fail than lines are read, shapes turn off (shapeUse).

// shapeOp is what the walk does with one value of a line.
type shapeOp uint8

const (
	opEnd  shapeOp = iota // no value: the line's last bytes
	opSkip                // a key the walk does not know: any JSON value, validated
	opNull                // a known part the walk leaves unset when null: must be null
	opID
	opCustomID
	opStatus
	opRequestID
	opRawBody
	opObject
	opModel
	opBodyStatus
	opPromptTokens
	opCompletionTokens
	opInputTokens
	opOutputTokens
	opPromptCached
	opPromptCacheWrite
	opInputCached
	opInputCacheWrite
	opCompletionReasoning
	opOutputReasoning
	opContent
	opRefusal
	opText
	opFinish
	opErrCode
	opErrMsg
	opBodyErrMsg
	opBodyErrType
	opBodyErrCode
)

// shapeEv is a part of the decoded line that the walk allocates as it
// enters an object (or, for the body, a place it notes).
type shapeEv uint8

const (
	evResponse shapeEv = iota + 1
	evBody
	evBodyEnd
	evUsage
	evPromptDetails
	evInputDetails
	evCompletionDetails
	evOutputDetails
	evChoice
	evMessage
	evLineErr
	evBodyErr
)

// The walk's fields by their path in the line: scalars, the objects it
// descends into (with the names it knows there), and the known parts whose
// null it leaves unset. A known key whose value is none of these (tool
// calls, several choices, a Responses API output, …) makes a line's shape
// one not kept.
var (
	shapeScalars = map[string]shapeOp{
		"id":                                    opID,
		"custom_id":                             opCustomID,
		"response.status_code":                  opStatus,
		"response.request_id":                   opRequestID,
		"response.body":                         opRawBody, // a body that is not an object is kept raw
		"response.body.object":                  opObject,
		"response.body.model":                   opModel,
		"response.body.status":                  opBodyStatus,
		"response.body.usage.prompt_tokens":     opPromptTokens,
		"response.body.usage.completion_tokens": opCompletionTokens,
		"response.body.usage.input_tokens":      opInputTokens,
		"response.body.usage.output_tokens":     opOutputTokens,
		"response.body.usage.prompt_tokens_details.cached_tokens":        opPromptCached,
		"response.body.usage.prompt_tokens_details.cache_write_tokens":   opPromptCacheWrite,
		"response.body.usage.input_tokens_details.cached_tokens":         opInputCached,
		"response.body.usage.input_tokens_details.cache_write_tokens":    opInputCacheWrite,
		"response.body.usage.completion_tokens_details.reasoning_tokens": opCompletionReasoning,
		"response.body.usage.output_tokens_details.reasoning_tokens":     opOutputReasoning,
		"response.body.choices.0.message.content":                        opContent,
		"response.body.choices.0.message.refusal":                        opRefusal,
		"response.body.choices.0.text":                                   opText,
		"response.body.choices.0.finish_reason":                          opFinish,
		"error.code":                                                     opErrCode,
		"error.message":                                                  opErrMsg,
		"response.body.error.message":                                    opBodyErrMsg,
		"response.body.error.type":                                       opBodyErrType,
		"response.body.error.code":                                       opBodyErrCode,
	}
	shapeObjects = map[string]struct {
		ev    shapeEv
		names []string
	}{
		"":                    {0, resultNames},
		"response":            {evResponse, responseNames},
		"response.body":       {evBody, bodyNames},
		"response.body.usage": {evUsage, usageNames},
		"response.body.usage.prompt_tokens_details":     {evPromptDetails, cacheNames},
		"response.body.usage.input_tokens_details":      {evInputDetails, cacheNames},
		"response.body.usage.completion_tokens_details": {evCompletionDetails, reasoningNames},
		"response.body.usage.output_tokens_details":     {evOutputDetails, reasoningNames},
		"response.body.choices.0":                       {evChoice, choiceNames},
		"response.body.choices.0.message":               {evMessage, messageNames},
		"error":                                         {evLineErr, lineErrNames},
		"response.body.error":                           {evBodyErr, bodyErrNames},
	}
	shapeNulls = map[string]bool{
		"response": true, "error": true, "response.body.incomplete_details": true,
		"response.body.usage": true, "response.body.choices": true, "response.body.output": true,
		"response.body.data": true, "response.body.results": true, "response.body.error": true,
		"response.body.usage.prompt_tokens_details":     true,
		"response.body.usage.input_tokens_details":      true,
		"response.body.usage.completion_tokens_details": true,
		"response.body.usage.output_tokens_details":     true,
		"response.body.choices.0.message":               true,
		"response.body.choices.0.message.tool_calls":    true,
		"response.body.choices.0.message.function_call": true,
	}
)

// A shapeSeg is the bytes before a value and what is done with the value.
type shapeSeg struct {
	lit   []byte
	op    shapeOp
	arg   int // an input shape's part (openai_inshape.go)
	depth int
	// first and last are lit's first and last eight bytes (first only
	// lit's bytes where it is shorter, mask the bits they fill): most of a
	// line's bytes between values are compared in these two words.
	first, last, mask uint64
	// evs[ev0:ev1] happen in lit.
	ev0, ev1 int
}

// A shapeEvent happens at byte off of segment seg's bytes.
type shapeEvent struct {
	seg, off int
	ev       shapeEv
}

type resultShape struct {
	segs []shapeSeg
	evs  []shapeEvent
}

// learnShape cuts the values out of line, a line the walk decoded; ok is
// false where its shape holds a part the shapes do not follow.
func learnShape(line []byte) (s *resultShape, ok bool) {
	l := shapeLearner{line: line, s: new(resultShape)}
	i := skipSpace(line, 0)
	end := l.object(i, 0, "")
	if l.bad || end < 0 {
		return nil, false
	}
	l.s.segs = append(l.s.segs, shapeSeg{lit: slices.Clone(line[l.lit:]), op: opEnd})
	finishSegs(l.s.segs)
	for k := range l.s.segs {
		sg := &l.s.segs[k]
		for sg.ev0 = 0; sg.ev0 < len(l.s.evs) && l.s.evs[sg.ev0].seg < k; sg.ev0++ {
		}
		for sg.ev1 = sg.ev0; sg.ev1 < len(l.s.evs) && l.s.evs[sg.ev1].seg == k; sg.ev1++ {
		}
	}
	return l.s, true
}

// finishSegs sets each segment's first and last words.
func finishSegs(segs []shapeSeg) {
	for k := range segs {
		sg := &segs[k]
		var w [8]byte
		n := copy(w[:], sg.lit)
		sg.first, sg.mask = binary.LittleEndian.Uint64(w[:]), ^uint64(0)
		if n < 8 {
			sg.mask = 1<<(8*n) - 1
		} else {
			sg.last = binary.LittleEndian.Uint64(sg.lit[len(sg.lit)-8:])
		}
	}
}

type shapeLearner struct {
	line []byte
	lit  int // where the bytes of the segment being gathered start
	s    *resultShape
	bad  bool
}

func (l *shapeLearner) event(at int, ev shapeEv) {
	l.s.evs = append(l.s.evs, shapeEvent{seg: len(l.s.segs), off: at - l.lit, ev: ev})
}

// value cuts out the value at i, at path; known says whether the walk knows
// its key (it descends into the object holding it, and the key is one of
// that object's names).
func (l *shapeLearner) value(i, depth int, path string, known bool) int {
	b := l.line
	if i >= len(b) {
		l.bad = true
		return -1
	}
	switch c := b[i]; {
	case c == '{':
		if known {
			if _, ok := shapeObjects[path]; !ok {
				l.bad = true
				return -1
			}
			return l.object(i, depth, path)
		}
		return l.container(i, depth)
	case c == '[':
		if !known {
			return l.container(i, depth)
		}
		if path != "response.body.choices" {
			l.bad = true
			return -1
		}
		// One choice, an object: the walk reads choices one by one, and the
		// row only the first.
		j := skipSpace(b, i+1)
		if j >= len(b) || b[j] != '{' {
			l.bad = true
			return -1
		}
		end := l.object(j, depth+1, path+".0")
		if end < 0 {
			return -1
		}
		k := skipSpace(b, end)
		if k >= len(b) || b[k] != ']' {
			l.bad = true
			return -1
		}
		return k + 1
	}
	end, _ := scanValue(nil, b, i, depth)
	if end < 0 {
		l.bad = true
		return -1
	}
	op := opSkip
	if known {
		var ok bool
		if op, ok = shapeScalars[path]; !ok {
			if !isNull(b[i:end]) || !shapeNulls[path] {
				l.bad = true
				return -1
			}
			op = opNull
		}
	}
	l.s.segs = append(l.s.segs, shapeSeg{lit: slices.Clone(b[l.lit:i]), op: op, depth: depth})
	l.lit = end
	return end
}

// object cuts out the values of an object the walk descends into.
func (l *shapeLearner) object(i, depth int, path string) int {
	o := shapeObjects[path]
	if o.ev != 0 {
		l.event(i, o.ev)
	}
	end := l.members(i, depth, func(key string) (string, bool) {
		child := key
		if path != "" {
			child = path + "." + key
		}
		return child, slices.Contains(o.names, key)
	})
	if end > 0 && o.ev == evBody {
		l.event(end-1, evBodyEnd)
	}
	return end
}

// container cuts out the values of an object or array the walk only
// validates (every value in it is skipped).
func (l *shapeLearner) container(i, depth int) int {
	if l.line[i] == '{' {
		return l.members(i, depth, func(string) (string, bool) { return "", false })
	}
	end, _, ok := each(jval{l.line, i, depth}, func(el jval) (int, bool) {
		e := l.value(el.i, el.depth, "", false)
		return e, e >= 0
	})
	if !ok {
		l.bad = true
		return -1
	}
	return end
}

// members walks the object at i; child names a member's path and says
// whether the walk knows its key.
func (l *shapeLearner) members(i, depth int, child func(key string) (string, bool)) int {
	end, ok := eachKey(l.line, i, func(key string, vs int) (int, bool) {
		path, known := child(key)
		e := l.value(vs, depth+1, path, known)
		return e, e >= 0
	})
	if !ok {
		l.bad = true
		return -1
	}
	return end
}

// eachKey walks the object at b[i] for a shape's learner, as each walks an
// array (fastjson.go): fn gets each key
// (false for one with an escape or a non-ASCII byte, which the walk leaves
// to encoding/json) and where its value starts, and returns where the value
// ends.
func eachKey(b []byte, i int, fn func(key string, vs int) (int, bool)) (int, bool) {
	var fl jflags
	i = space(b, i+1, &fl)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return -1, false
		}
		ke, kfl := scanString(b, i)
		if ke < 0 || kfl != 0 {
			return -1, false
		}
		j := skipSpace(b, ke)
		if j >= len(b) || b[j] != ':' {
			return -1, false
		}
		ve, ok := fn(string(b[i+1:ke-1]), skipSpace(b, j+1))
		if !ok {
			return -1, false
		}
		var more bool
		if i, more, ok = afterValue(b, ve, '}', &fl); !ok || !more {
			return i, ok
		}
	}
}

// publish puts s first among the shapes at p (at most maxShapes of them,
// none twice).
func publish[T any](p *atomic.Pointer[[]*T], s *T) {
	for {
		old := p.Load()
		next := []*T{s}
		if old != nil {
			for _, o := range *old {
				if len(next) < maxShapes && !reflect.DeepEqual(o, s) {
					next = append(next, o)
				}
			}
		}
		if p.CompareAndSwap(old, &next) {
			return
		}
	}
}

// decode decodes line into in as the walk would, if line has the shape
// (else in is left for the caller to reset). Release in.memo when done.
func (s *resultShape) decode(line []byte, in *openaiResultLine) bool {
	jm := newMemo(line)
	in.memo = jm
	var (
		r      *openaiResponse
		b      *openaiBody
		u      *openaiUsage
		pd, id *openaiCacheDetails
		cd, od *openaiReasoningDetails
		c      *openaiChoice
		m      *openaiMessage
		e      *openaiLineErr
		be     *openaiBodyErr
		bodyAt int
	)
	pos := 0
	for k := range s.segs {
		sg := &s.segs[k]
		if !sg.prefixOf(line[pos:]) {
			return false
		}
		at := pos
		pos += len(sg.lit)
		for ev := sg.ev0; ev < sg.ev1; ev++ {
			switch s.evs[ev].ev {
			case evResponse:
				r = jm.response()
				in.Response = r
			case evBody:
				b, bodyAt = jm.body(), at+s.evs[ev].off
			case evBodyEnd:
				r.Body, r.decoded = line[bodyAt:at+s.evs[ev].off+1], b
			case evUsage:
				u = jm.usage()
				b.Usage = u
			case evPromptDetails:
				pd = jm.cacheDetails()
				u.PromptTokensDetails = pd
			case evInputDetails:
				id = jm.cacheDetails()
				u.InputTokensDetails = id
			case evCompletionDetails:
				cd = jm.reasoningDetails()
				u.CompletionTokensDetails = cd
			case evOutputDetails:
				od = jm.reasoningDetails()
				u.OutputTokensDetails = od
			case evChoice:
				b.Choices = append(jm.choices(), openaiChoice{})
				c = &b.Choices[0]
			case evMessage:
				m = jm.message()
				c.Message = m
			case evLineErr:
				e = new(openaiLineErr)
				in.Error = e
			case evBodyErr:
				be = new(openaiBodyErr)
				b.Error = be
			}
		}
		if sg.op == opEnd {
			return pos == len(line)
		}
		v := jval{line, pos, sg.depth}
		var end int
		ok := true
		switch sg.op {
		case opSkip:
			end, _ = scanValue(nil, line, pos, sg.depth)
		case opNull:
			end = literal(line, pos, "null")
		case opID:
			end, ok = idAt(v, in)
		case opCustomID:
			end, ok = rawAt(v, (*[]byte)(&in.CustomID))
		case opStatus:
			end, ok = statusAt(v, r)
		case opRequestID:
			end, ok = requestIDAt(jm, v, r)
		case opRawBody:
			// The walk descends into a body that is an object.
			if pos < len(line) && line[pos] == '{' {
				return false
			}
			end, ok = rawAt(v, (*[]byte)(&r.Body))
		case opObject:
			end, ok = commonAt(v, &b.Object, &lastObject)
		case opModel:
			end, ok = commonAt(v, &b.Model, &lastModel)
		case opBodyStatus:
			end, ok = commonAt(v, &b.Status, &lastStatus)
		case opPromptTokens:
			end, ok = int64At(v, &u.PromptTokens)
		case opCompletionTokens:
			end, ok = int64At(v, &u.CompletionTokens)
		case opInputTokens:
			end, ok = int64At(v, &u.InputTokens)
		case opOutputTokens:
			end, ok = int64At(v, &u.OutputTokens)
		case opPromptCached:
			end, ok = int64At(v, &pd.CachedTokens)
		case opPromptCacheWrite:
			end, ok = int64At(v, &pd.CacheWriteTokens)
		case opInputCached:
			end, ok = int64At(v, &id.CachedTokens)
		case opInputCacheWrite:
			end, ok = int64At(v, &id.CacheWriteTokens)
		case opCompletionReasoning:
			end, ok = int64At(v, &cd.ReasoningTokens)
		case opOutputReasoning:
			end, ok = int64At(v, &od.ReasoningTokens)
		case opContent:
			end, ok = contentAt(jm, v, m)
		case opRefusal:
			end, ok = strPtrAt(v, &m.Refusal)
		case opText:
			end, ok = strPtrAt(v, &c.Text)
		case opFinish:
			end, ok = commonAt(v, &c.FinishReason, &lastFinishReason)
		case opErrCode:
			end, ok = rawAt(v, (*[]byte)(&e.Code))
		case opErrMsg:
			end, ok = strAt(v, &e.Message)
		case opBodyErrMsg:
			end, ok = strAt(v, &be.Message)
		case opBodyErrType:
			end, ok = strAt(v, &be.Type)
		case opBodyErrCode:
			end, ok = rawAt(v, (*[]byte)(&be.Code))
		}
		if !ok || end < 0 {
			return false
		}
		pos = end
	}
	return false
}

// prefixOf reports whether b starts with the segment's bytes.
func (sg *shapeSeg) prefixOf(b []byte) bool {
	n := len(sg.lit)
	if len(b) < n {
		return false
	}
	if len(b) < 8 {
		return string(b[:n]) == string(sg.lit)
	}
	if binary.LittleEndian.Uint64(b)&sg.mask != sg.first {
		return false
	}
	if n <= 8 {
		return true
	}
	if binary.LittleEndian.Uint64(b[n-8:]) != sg.last {
		return false
	}
	return n <= 16 || string(b[8:n-8]) == string(sg.lit[8:n-8])
}

// The shapes of the lines read so far, most recently learned first: a
// batch's output has one or two (answers, and errors), its error file a few.
const maxShapes = 4

var (
	shapes     atomic.Pointer[[]*resultShape]
	shapeStats shapeUse
)

// shapeUse counts the lines shapes read and the attempts that failed, and
// turns shapes off where they do not pay: an attempt that fails past a
// line's last bytes costs up to a decode on top of the walk (in a file whose
// lines take many shapes that differ inside, up to twice the walk alone).
type shapeUse struct {
	hits, fails atomic.Int64
	off         atomic.Bool
}

// hit counts a line a shape read, one line in 16 or so so that the cores
// parsing lines do not all write the counter: those that end at an address
// that is a multiple of 16 (neither a line's place in its chunk nor its
// length alone, which a layout may fix, decides).
func (u *shapeUse) hit(line []byte) {
	if (uintptr(unsafe.Pointer(unsafe.SliceData(line)))+uintptr(len(line)))&15 == 0 {
		u.hits.Add(16)
	}
}

// fail counts an attempt that failed past the line's last bytes; once
// more than 1024 attempts failed, and more than lines were read, shapes
// are off for good.
func (u *shapeUse) fail() {
	if f := u.fails.Add(1); f%256 == 0 && f > 1024 && f > u.hits.Load() {
		u.off.Store(true)
	}
}

// miss counts a line no shape read in its memo, and says whether to learn
// its shape: one such line in 64 is tried. The count is the memo's, not
// shared: a file no shape fits (tool calls throughout) costs each line no
// write to memory the cores share.
func (u *shapeUse) miss(jm *jmemo) (learn bool) {
	jm.shapeMisses++
	return jm.shapeMisses%64 == 1 && !u.off.Load()
}

// endsWith reports whether line ends with the bytes after a shape's last
// value. Tried first: a line of another shape often differs there (an
// error's line from an answer's), and is then passed over at once.
func endsWith(line []byte, segs []shapeSeg) bool {
	end := segs[len(segs)-1].lit
	return len(line) >= len(end) && string(line[len(line)-len(end):]) == string(end)
}

// shapeDecode decodes line with the first shape it has, as decode.
func shapeDecode(line []byte, in *openaiResultLine) bool {
	p := shapes.Load()
	if p == nil || shapeStats.off.Load() {
		return false
	}
	for _, s := range *p {
		if !endsWith(line, s.segs) {
			continue
		}
		if s.decode(line, in) {
			shapeStats.hit(line)
			return true
		}
		shapeStats.fail()
		in.memo.release()
		*in = openaiResultLine{}
	}
	return false
}

// learnFrom keeps the shape of line, which the walk decoded into walked
// and no shape matched, if the line decodes through it into the same row.
// One line in 64 of those no shape matched is tried (shapeUse.miss), so
// that lines whose shape is not kept cost little.
func learnFrom(line []byte, walked *openaiResultLine) {
	if !shapeStats.miss(walked.memo) {
		return
	}
	if r := walked.Response; r != nil && len(r.Body) > 0 && r.Body[0] == '{' && r.decoded == nil {
		return // the walk left the body to be decoded apart
	}
	s, ok := learnShape(line)
	if !ok {
		return
	}
	var in openaiResultLine
	defer in.memo.release()
	if !s.decode(line, &in) {
		return
	}
	want, werr := openaiRow(walked, decodeBody)
	got, gerr := openaiRow(&in, decodeBody)
	if werr != nil || gerr != nil || !reflect.DeepEqual(want, got) {
		return
	}
	publish(&shapes, s)
}
