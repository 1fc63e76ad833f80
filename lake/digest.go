package lake

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"
	"strings"

	"github.com/batchlake/batchlake/lake/sha256x2"
)

// Digest is a sha256 digest. It prints as "sha256-<hex>" (see String) and
// names every content-addressed object in the lake.
type Digest [32]byte

const digestPrefix = "sha256-"

// Sum returns the digest of b.
func Sum(b []byte) Digest { return sha256.Sum256(b) }

// String renders the digest with its algorithm, "sha256-<64 hex>".
func (d Digest) String() string { return digestPrefix + d.Hex() }

// Hex renders the digest as 64 lower-case hex digits.
func (d Digest) Hex() string { return string(d.AppendHex(make([]byte, 0, 2*len(d)))) }

// hexPairs are the two lower-case hex digits of each byte, as the bytes of a
// little-endian uint16.
var hexPairs = func() (t [256]uint16) {
	const digits = "0123456789abcdef"
	for i := range t {
		t[i] = uint16(digits[i>>4]) | uint16(digits[i&15])<<8
	}
	return t
}()

// AppendHex appends d in lower-case hex to dst, as hex.AppendEncode does,
// four bytes at a time: a plan renders two million digests at 1M records.
func (d Digest) AppendHex(dst []byte) []byte {
	n := len(dst)
	dst = slices.Grow(dst, 2*len(d))[:n+2*len(d)]
	out := dst[n:]
	for i := 0; i < len(d); i += 4 {
		binary.LittleEndian.PutUint64(out[2*i:], uint64(hexPairs[d[i]])|uint64(hexPairs[d[i+1]])<<16|
			uint64(hexPairs[d[i+2]])<<32|uint64(hexPairs[d[i+3]])<<48)
	}
	return dst
}

// IsZero reports whether d is the zero digest.
func (d Digest) IsZero() bool { return d == Digest{} }

// MarshalText implements encoding.TextMarshaler.
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Digest) UnmarshalText(b []byte) error {
	p, err := ParseDigest(string(b))
	if err != nil {
		return err
	}
	*d = p
	return nil
}

// ParseDigest parses "sha256-<hex>" or a bare 64-digit hex string.
func ParseDigest(s string) (Digest, error) {
	var d Digest
	h := strings.TrimPrefix(s, digestPrefix)
	if len(h) != 64 {
		return d, fmt.Errorf("parse digest %q: want 64 hex digits", s)
	}
	if _, err := hex.Decode(d[:], []byte(h)); err != nil {
		return d, fmt.Errorf("parse digest %q: %w", s, err)
	}
	if strings.ToLower(h) != h {
		return d, fmt.Errorf("parse digest %q: hex must be lower case", s)
	}
	return d, nil
}

// FieldHasher hashes a sequence of fields, each length-prefixed (8 bytes, big
// endian) so that ("ab","c") and ("a","bc") differ. It implements the identity
// rules of docs/contract.md.
type FieldHasher struct {
	h   hash.Hash
	buf [fieldBuffer]byte // short fields not yet written to h: one Write for several
	n   int               // bytes in buf
}

// fieldBuffer is how many bytes of short fields and length prefixes a
// FieldHasher gathers before it hashes them; a longer field is hashed where
// it lies, not copied.
const fieldBuffer = 128

// NewFieldHasher returns an empty FieldHasher.
func NewFieldHasher() *FieldHasher { return &FieldHasher{h: sha256.New()} }

// Add appends one length-prefixed field.
func (f *FieldHasher) Add(field []byte) *FieldHasher {
	if f.n+8 > fieldBuffer {
		f.flush()
	}
	binary.BigEndian.PutUint64(f.buf[f.n:], uint64(len(field)))
	f.n += 8
	if f.n+len(field) <= fieldBuffer {
		f.n += copy(f.buf[f.n:], field)
		return f
	}
	f.flush()
	f.h.Write(field)
	return f
}

// AddString appends one length-prefixed string field.
func (f *FieldHasher) AddString(s string) *FieldHasher {
	if f.n+8+len(s) <= fieldBuffer {
		binary.BigEndian.PutUint64(f.buf[f.n:], uint64(len(s)))
		f.n += 8
		f.n += copy(f.buf[f.n:], s)
		return f
	}
	return f.Add([]byte(s))
}

// AddDigest appends a digest as one length-prefixed field, as Add(d[:])
// would. It takes d by value and copies it into the buffer, so that a digest
// in a caller's struct does not move that struct to the heap.
func (f *FieldHasher) AddDigest(d Digest) *FieldHasher {
	if f.n+8+len(d) > fieldBuffer {
		f.flush()
	}
	binary.BigEndian.PutUint64(f.buf[f.n:], uint64(len(d)))
	f.n += 8
	f.n += copy(f.buf[f.n:], d[:])
	return f
}

func (f *FieldHasher) flush() {
	f.h.Write(f.buf[:f.n])
	f.n = 0
}

// Sum returns the digest of the fields added so far.
func (f *FieldHasher) Sum() Digest {
	f.flush()
	var d Digest
	f.h.Sum(d[:0])
	return d
}

// HashCall is the digest of the length-prefixed fields method, url and body,
// as a FieldHasher adding them in that order gives: a request's digest. It is
// called for every record, so a request that fits a stack buffer is hashed
// in one call, without allocating.
func HashCall(method, url string, body []byte) Digest {
	n := 24 + len(method) + len(url) + len(body)
	if n > 4096 {
		return NewFieldHasher().AddString(method).AddString(url).Add(body).Sum()
	}
	var b [4096]byte
	return sha256.Sum256(append(callHead(b[:0], Call{method, url, body}), body...))
}

// Call is a request as HashCall names it, for HashCall2.
type Call struct {
	Method, URL string
	Body        []byte
}

// HashCall2 is HashCall of two calls, hashed together (sha256x2): the same
// digests in about the time of one.
func HashCall2(a, b Call) (Digest, Digest) {
	var bufA, bufB [64]byte
	var sa, sb sha256x2.State
	sa.Reset()
	sb.Reset()
	sha256x2.Write2(&sa, callHead(bufA[:0], a), &sb, callHead(bufB[:0], b))
	sha256x2.Write2(&sa, a.Body, &sb, b.Body)
	return sha256x2.Sum2(&sa, &sb)
}

// callHead is what HashCall hashes before the body: the method and URL and
// the body's length, each length a big-endian uint64.
func callHead(buf []byte, c Call) []byte {
	buf = append(binary.BigEndian.AppendUint64(buf, uint64(len(c.Method))), c.Method...)
	buf = append(binary.BigEndian.AppendUint64(buf, uint64(len(c.URL))), c.URL...)
	return binary.BigEndian.AppendUint64(buf, uint64(len(c.Body)))
}

// HashFields2 is HashFields of two lists of fields, hashed together.
func HashFields2(a, b []string) (Digest, Digest) {
	var bufA, bufB [1024]byte
	ma, mb := appendFields(bufA[:0], a), appendFields(bufB[:0], b)
	return sha256x2.Sum256x2(ma, mb)
}

func appendFields(buf []byte, fields []string) []byte {
	for _, s := range fields {
		buf = append(binary.BigEndian.AppendUint64(buf, uint64(len(s))), s...)
	}
	return buf
}

// HashFields is the digest of the given length-prefixed string fields. It is
// called for every record (its record id and model config hash), so fields
// that fit a stack buffer are hashed in one call, without allocating.
func HashFields(fields ...string) Digest {
	n := 0
	for _, s := range fields {
		n += 8 + len(s)
	}
	if n <= 1024 {
		var b [1024]byte
		return sha256.Sum256(appendFields(b[:0], fields))
	}
	f := NewFieldHasher()
	for _, s := range fields {
		f.AddString(s)
	}
	return f.Sum()
}
