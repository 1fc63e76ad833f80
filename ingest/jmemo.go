package ingest

import (
	"sync"
	"unsafe"
)

// jmemo remembers, for one line, where each object and array that a
// scanValue validated ends, with its flags. A decoder that walks a value
// it has scanned already (canonicalAppend over an input line's model
// configuration) finds the containers' ends here instead of scanning them
// again. (The decoders that descend as they scan, with walk and each, need
// no memo of containers.) A hit
// gives what scanValue would (the same bytes were validated), so a nil or
// full memo only costs speed. A memo also lends a result line's decoders
// the parts they fill.
type jmemo struct {
	base, size uintptr
	n          int
	start, end [64]int32 // offsets in the line; starts ascending, end 0 while unknown
	fl         [64]jflags
	// oa lends the OpenAI decoders the parts of a decoded result line
	// (openaiParts), unless noParts: a memo released before the decoded
	// line is done with must not lend them.
	oa      openaiParts
	noParts bool
	// scratch lends an input line's decoder a buffer for its canonical
	// model configuration: one on the stack escaped to the heap, an
	// allocation a line.
	scratch []byte
	// members holds an input line's body members (inputParts.ms).
	members [16]bodyMember
	// shapeMisses counts the lines of this memo no shape read, from line
	// to line (shapeUse.miss).
	shapeMisses uint32
	// strs is the block the strings of the memo's lines are carved from
	// (str), kept from line to line.
	strs []byte
}

// strBlock is the size of a memo's block of strings.
const strBlock = 64 << 10

// str is string(b), its bytes carved from the memo's block of strings
// instead of allocated alone: a line's strings (a result line's answer,
// request id and custom_id) then cost no allocation of their own. A block is
// never written again where it has lent bytes, and stays alive as long as a
// string of it does; a full block is left to those strings and a new one
// started. A nil memo, or a string longer than a quarter block, allocates
// as string(b) does.
func (m *jmemo) str(b []byte) string {
	if m == nil || len(b) == 0 || len(b) > strBlock/4 {
		return string(b)
	}
	if len(m.strs)+len(b) > cap(m.strs) {
		m.strs = make([]byte, 0, strBlock)
	}
	off := len(m.strs)
	m.strs = append(m.strs, b...)
	return unsafe.String(&m.strs[off], len(b))
}

// memos are reused: one per line parsed would be most of a line's garbage.
var memos = sync.Pool{New: func() any { return new(jmemo) }}

// newMemo returns an empty memo of line; release it when the line's
// decoding is done, and use it no more.
func newMemo(line []byte) *jmemo {
	m := memos.Get().(*jmemo)
	m.base, m.size, m.n = uintptr(unsafe.Pointer(unsafe.SliceData(line))), uintptr(len(line)), 0
	m.oa.nCache, m.oa.nReasoning, m.oa.nMessage, m.noParts = 0, 0, 0, false
	return m
}

func (m *jmemo) release() {
	if m != nil {
		m.base, m.size, m.n = 0, 0, 0
		memos.Put(m)
	}
}

// holds reports whether b lies within the memo's line.
func (m *jmemo) holds(b []byte) bool {
	if m == nil || len(b) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= m.base && p+uintptr(len(b)) <= m.base+m.size
}

// offset is the offset of b[i] in the line, or -1 if b is not part of it.
func (m *jmemo) offset(b []byte, i int) int {
	if !m.holds(b) {
		return -1
	}
	return int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))-m.base) + i
}

// lookup returns the end offset and flags of the container starting at off.
func (m *jmemo) lookup(off int) (end int, fl jflags, ok bool) {
	lo, hi := 0, m.n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if int(m.start[mid]) < off {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < m.n && int(m.start[lo]) == off && m.end[lo] > 0 {
		return int(m.end[lo]), m.fl[lo], true
	}
	return 0, 0, false
}

// reserve makes an entry for a container starting at off, before its
// members are scanned (so entries stay in start order); -1 if there is no
// room or off would break the order.
func (m *jmemo) reserve(off int) int {
	if m.n == len(m.start) || m.n > 0 && int(m.start[m.n-1]) >= off {
		return -1
	}
	m.start[m.n], m.end[m.n] = int32(off), 0
	m.n++
	return m.n - 1
}

// set records the end offset and flags of entry k (from reserve).
func (m *jmemo) set(k, end int, fl jflags) {
	if k >= 0 {
		m.end[k], m.fl[k] = int32(end), fl
	}
}
