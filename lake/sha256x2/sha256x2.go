package sha256x2

import (
	"encoding/binary"
	"hash"
)

// Size is a digest's length in bytes; BlockSize the compression function's
// input.
const (
	Size      = 32
	BlockSize = 64
)

var iv = [8]uint32{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}

// State is one SHA-256 computation in progress. It is a hash.Hash; Write2
// advances two of them together.
type State struct {
	h   [8]uint32
	x   [BlockSize]byte // a partial block
	nx  int
	len uint64
}

var _ hash.Hash = (*State)(nil)

// New returns a State ready for its first byte.
func New() *State {
	s := new(State)
	s.Reset()
	return s
}

// Reset starts the computation again.
func (s *State) Reset() { s.h, s.nx, s.len = iv, 0, 0 }

// Size is Size.
func (s *State) Size() int { return Size }

// BlockSize is BlockSize.
func (s *State) BlockSize() int { return BlockSize }

// Write adds p to the message. It never fails.
func (s *State) Write(p []byte) (int, error) {
	n := len(p)
	s.len += uint64(n)
	p = s.top(p)
	if s.nx == BlockSize {
		block1(&s.h, s.x[:])
		s.nx = 0
	}
	if s.nx == 0 {
		full := len(p) &^ (BlockSize - 1)
		block1(&s.h, p[:full])
		p = p[full:]
		s.nx = copy(s.x[:], p)
	}
	return n, nil
}

// top fills the partial block from p, if there is one, and returns the rest
// of p.
func (s *State) top(p []byte) []byte {
	if s.nx == 0 {
		return p
	}
	n := copy(s.x[s.nx:], p)
	s.nx += n
	return p[n:]
}

// Write2 adds pa to a's message and pb to b's, hashing their blocks in pairs
// as far as both have them.
func Write2(a *State, pa []byte, b *State, pb []byte) {
	a.len += uint64(len(pa))
	b.len += uint64(len(pb))
	pa, pb = a.top(pa), b.top(pb)
	switch {
	case a.nx == BlockSize && b.nx == BlockSize:
		block2(&a.h, a.x[:], &b.h, b.x[:])
		a.nx, b.nx = 0, 0
	case a.nx == BlockSize:
		block1(&a.h, a.x[:])
		a.nx = 0
	case b.nx == BlockSize:
		block1(&b.h, b.x[:])
		b.nx = 0
	}
	// A state still holding a partial block has used all of its input.
	fa, fb := 0, 0
	if a.nx == 0 {
		fa = len(pa) &^ (BlockSize - 1)
	}
	if b.nx == 0 {
		fb = len(pb) &^ (BlockSize - 1)
	}
	both := min(fa, fb)
	block2(&a.h, pa[:both], &b.h, pb[:both])
	block1(&a.h, pa[both:fa])
	block1(&b.h, pb[both:fb])
	if a.nx == 0 {
		a.nx = copy(a.x[:], pa[fa:])
	}
	if b.nx == 0 {
		b.nx = copy(b.x[:], pb[fb:])
	}
}

// Sum appends the digest of the message so far to b; the State goes on.
func (s *State) Sum(b []byte) []byte {
	d := s.Sum256()
	return append(b, d[:]...)
}

// Sum256 is the digest of the message so far; the State goes on.
func (s *State) Sum256() [Size]byte {
	var pad [2 * BlockSize]byte
	h, tail := s.h, s.padded(&pad)
	block1(&h, tail)
	return digest(&h)
}

// Sum2 is the digests of the messages a and b hold so far; both go on.
func Sum2(a, b *State) (da, db [Size]byte) {
	var pa, pb [2 * BlockSize]byte
	ha, ta := a.h, a.padded(&pa)
	hb, tb := b.h, b.padded(&pb)
	both := min(len(ta), len(tb))
	block2(&ha, ta[:both], &hb, tb[:both])
	block1(&ha, ta[both:])
	block1(&hb, tb[both:])
	return digest(&ha), digest(&hb)
}

// Sum256x2 is the SHA-256 digests of a and b, hashed together.
func Sum256x2(a, b []byte) (da, db [Size]byte) {
	var sa, sb State
	sa.h, sb.h = iv, iv
	Write2(&sa, a, &sb, b)
	return Sum2(&sa, &sb)
}

// padded writes the partial block, the padding and the message's length in
// bits into buf and returns the one or two blocks of it to hash.
func (s *State) padded(buf *[2 * BlockSize]byte) []byte {
	n := copy(buf[:], s.x[:s.nx])
	buf[n] = 0x80
	end := BlockSize
	if n >= BlockSize-8 {
		end = 2 * BlockSize
	}
	binary.BigEndian.PutUint64(buf[end-8:], s.len<<3)
	return buf[:end]
}

func digest(h *[8]uint32) (d [Size]byte) {
	for i, v := range h {
		binary.BigEndian.PutUint32(d[4*i:], v)
	}
	return d
}
