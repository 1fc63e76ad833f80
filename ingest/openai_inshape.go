package ingest

import (
	"reflect"
	"slices"
	"sync/atomic"
)

// Input line shapes: what result line shapes (openai_shape.go) are to
// result lines, for the request lines plan reads. A request line's parts
// (inputParts) are its custom_id, method and url values, its body's span
// and the body's members: a shape holds the bytes between the line's
// scalar values, which of those values are which part, and the body's
// members in order (their keys are in the shape's bytes). A line with the
// shape has the same keys, the same nesting and the same white space
// between tokens; its parts are then read without walking its objects,
// and its record made by the same code as the walk's (inputParts.finish).
//
// A shape is learned from a line the walk read, and kept only where the
// line gives the same record through it. Its body's configuration members
// must be scalars, and its content fields (messages, input, …) hold only
// scalars where the shape's line does: a line whose body differs in
// nesting is left to the walk.

// Input shape ops (shapeSeg.op; shapeSeg.arg says which part).
const (
	inEnd    shapeOp = iota // no value: the line's last bytes
	inSkip                  // outside the body, a key the walk does not know: any value
	inScalar                // inside the body's content fields: a scalar, validated
	inTop                   // custom_id, method or url (arg: its place in inputNames)
	inMember                // a configuration member of the body (arg: its place in the body)
)

type inputShape struct {
	segs []shapeSeg
	// The body starts at byte bodyOff of segment bodySeg's bytes and ends
	// at byte endOff of segment endSeg's.
	bodySeg, bodyOff, endSeg, endOff int
	// members are the body's members in order: a content field's key
	// alone (fl contentMember), a configuration member's key (v filled
	// from the line).
	members []bodyMember
	bfl     jflags
}

// learnInputShape cuts the values out of line, a line the walk read into
// walked; ok is false where its shape holds what input shapes do not follow.
func learnInputShape(line []byte, walked *inputParts) (s *inputShape, ok bool) {
	l := inputLearner{line: line, s: &inputShape{bodySeg: -1, bfl: walked.bfl}}
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '{' || !l.top(i) || l.s.bodySeg < 0 {
		return nil, false
	}
	l.seg(len(line), inEnd, 0, 0)
	finishSegs(l.s.segs)
	return l.s, true
}

type inputLearner struct {
	line []byte
	lit  int
	s    *inputShape
}

// seg ends the bytes gathered so far at i, before a value with op.
func (l *inputLearner) seg(i int, op shapeOp, arg, depth int) {
	l.s.segs = append(l.s.segs, shapeSeg{lit: slices.Clone(l.line[l.lit:i]), op: op, arg: arg, depth: depth})
}

// scalar cuts out the scalar at i; false if it is not one.
func (l *inputLearner) scalar(i, depth int, op shapeOp, arg int) (int, bool) {
	if i >= len(l.line) || l.line[i] == '{' || l.line[i] == '[' {
		return -1, false
	}
	end, _ := scanValue(nil, l.line, i, depth)
	if end < 0 {
		return -1, false
	}
	l.seg(i, op, arg, depth)
	l.lit = end
	return end, true
}

// top cuts out the values of the line's object at i.
func (l *inputLearner) top(i int) bool {
	_, ok := l.members(i, 0, func(key string, vs, depth int) (int, bool) {
		switch k := slices.Index(inputNames, key); {
		case k < 0:
			return l.any(vs, depth, inSkip)
		case k < 3:
			return l.scalar(vs, depth, inTop, k)
		default:
			return l.body(vs, depth)
		}
	})
	return ok
}

// body cuts out the values of the body at i.
func (l *inputLearner) body(i, depth int) (int, bool) {
	if i >= len(l.line) || l.line[i] != '{' {
		return -1, false
	}
	l.s.bodySeg, l.s.bodyOff = len(l.s.segs), i-l.lit
	end, ok := l.members(i, depth, func(key string, vs, depth int) (int, bool) {
		if slices.Contains(contentFields, key) {
			l.s.members = append(l.s.members, bodyMember{k: []byte(key), fl: contentMember})
			return l.any(vs, depth, inScalar)
		}
		l.s.members = append(l.s.members, bodyMember{k: []byte(key)})
		return l.scalar(vs, depth, inMember, len(l.s.members)-1)
	})
	if ok {
		l.s.endSeg, l.s.endOff = len(l.s.segs), end-1-l.lit
	}
	return end, ok
}

// any cuts out every scalar of the value at i with op.
func (l *inputLearner) any(i, depth int, op shapeOp) (int, bool) {
	if i >= len(l.line) {
		return -1, false
	}
	switch l.line[i] {
	case '{':
		return l.members(i, depth, func(_ string, vs, depth int) (int, bool) { return l.any(vs, depth, op) })
	case '[':
		end, _, ok := each(jval{l.line, i, depth}, func(el jval) (int, bool) { return l.any(el.i, el.depth, op) })
		return end, ok
	}
	return l.scalar(i, depth, op, 0)
}

// members walks the object at i, cutting out each member's value with fn
// (its key, where it starts, its depth).
func (l *inputLearner) members(i, depth int, fn func(key string, vs, depth int) (int, bool)) (int, bool) {
	return eachKey(l.line, i, func(key string, vs int) (int, bool) { return fn(key, vs, depth+1) })
}

// read reads the parts of line into in, if line has the shape.
func (s *inputShape) read(jm *jmemo, line []byte, in *inputParts) bool {
	in.ms = append(jm.members[:0], s.members...)
	in.bfl = s.bfl
	bodyAt, pos := -1, 0
	for k := range s.segs {
		sg := &s.segs[k]
		if !sg.prefixOf(line[pos:]) {
			return false
		}
		if k == s.bodySeg {
			bodyAt = pos + s.bodyOff
		}
		if k == s.endSeg {
			in.v[3] = line[bodyAt : pos+s.endOff+1]
		}
		pos += len(sg.lit)
		if sg.op == inEnd {
			return pos == len(line)
		}
		if sg.op != inSkip && pos < len(line) && (line[pos] == '{' || line[pos] == '[') {
			return false // another nesting than the shape's
		}
		end, fl := scanValue(nil, line, pos, sg.depth)
		if end < 0 {
			return false
		}
		switch sg.op {
		case inTop:
			in.v[sg.arg], in.vf[sg.arg] = line[pos:end], fl
		case inMember:
			m := &in.ms[sg.arg]
			m.v, m.fl = line[pos:end], fl
			if string(m.k) == "model" {
				in.model = m.v
			}
		}
		pos = end
	}
	return false
}

// The shapes of the request lines read so far, most recently learned
// first.
var (
	inputShapes     atomic.Pointer[[]*inputShape]
	inputShapeStats shapeUse
)

// byShape reads the parts of line by the first shape it has.
func (in *inputParts) byShape(jm *jmemo, line []byte) bool {
	p := inputShapes.Load()
	if p == nil || inputShapeStats.off.Load() {
		return false
	}
	for _, s := range *p {
		if !endsWith(line, s.segs) {
			continue
		}
		if s.read(jm, line, in) {
			inputShapeStats.hit(line)
			return true
		}
		inputShapeStats.fail()
		*in = inputParts{}
	}
	return false
}

// learnInputFrom keeps the shape of line, which no shape had and the walk
// read into rec, if the line gives the same record through it (as
// learnFrom).
func learnInputFrom(jm *jmemo, line []byte, keyField string, rec InputRecord) {
	if !inputShapeStats.miss(jm) {
		return
	}
	jm, jm2 := newMemo(line), newMemo(line) // the caller's is in use
	defer jm.release()
	defer jm2.release()
	var walked, in inputParts
	if !walked.walk(jm, line) {
		return
	}
	s, ok := learnInputShape(line, &walked)
	if !ok || !s.read(jm2, line, &in) {
		return
	}
	// With their request digests (the caller's may be left for later).
	got, gok := in.finish(jm2, line, keyField, nil)
	want, wok := walked.finish(jm, line, keyField, nil)
	if !gok || !wok || !reflect.DeepEqual(got, want) || got.CustomID != rec.CustomID || got.ConfigHash != rec.ConfigHash {
		return
	}
	publish(&inputShapes, s)
}
