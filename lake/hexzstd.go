package lake

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// A page of hex digests (record_id, request_sha256: most of the expected
// table's bytes and the costs table's record_id) is 64 lower-case hex digits
// a value after a short header of lengths. Its 16 symbols are equally likely
// and never repeat in a useful way, so the best any zstd level does is a
// Huffman code of 4 bits a digit, and even the fastest level spends much of
// its time looking for matches that are not there. appendHexFrame writes that
// code directly: a standard zstd frame (RFC 8878) whose blocks are the
// header as it is and then the digits as Huffman-coded literals with no
// sequences, the size zstd gives them or a little less, at about twice
// libzstd's speed at level 1 (BenchmarkHexPage). Any zstd decoder reads it;
// the files' codec is still ZSTD.
const (
	hexMinRun    = 1024      // fewer digits are not worth a frame of their own
	hexMaxPrefix = 4096      // the most bytes before the digits (a page's header)
	hexBlock     = 128 << 10 // zstd's largest block
)

// hexTree is the Huffman tree description of the code: weights in direct
// representation (a header byte of 127 + the symbols described, two 4-bit
// weights a byte) for the symbols 0 to 'e'; every digit has weight 1 (4
// bits), every other byte 0 (absent), and the last digit, 'f', takes the
// weight that makes the total a power of two, also 1. A digit's code is its
// place among the 16 in symbol order: '0'..'9' are 0..9, 'a'..'f' 10..15.
var hexTree = func() []byte {
	const described = 'f' // symbols 0 .. 'f'-1
	t := make([]byte, 1+(described+1)/2)
	t[0] = 127 + described
	for s := 0; s < described; s++ {
		if hexDigit(byte(s)) {
			t[1+s/2] |= 1 << (4 * (1 - s%2)) // first of a pair in the high nibble
		}
	}
	return t
}()

func hexDigit(c byte) bool { return c-'0' < 10 || c-'a' < 6 }

// allHex8 reports whether the 8 bytes of w (little-endian) are all
// lower-case hex digits, by per-byte range checks in one word.
func allHex8(w uint64) bool {
	const hi, ones = 0x8080808080808080, 0x0101010101010101
	if w&hi != 0 {
		return false
	}
	// Each byte is below 0x80, so adding at most 0x50 carries into no other
	// byte; a byte's high bit then says it is at least the bound.
	digit := (w + ones*(0x80-'0')) &^ (w + ones*(0x80-'9'-1))
	letter := (w + ones*(0x80-'a')) &^ (w + ones*(0x80-'f'-1))
	return (digit|letter)&hi == hi
}

// hexRunStart returns where the run of hex digits that ends src begins.
func hexRunStart(src []byte) int {
	i := len(src)
	for i >= 8 && allHex8(binary.LittleEndian.Uint64(src[i-8:])) {
		i -= 8
	}
	for i > 0 && hexDigit(src[i-1]) {
		i--
	}
	return i
}

// appendHexFrame appends src as a zstd frame of a raw block (the bytes before
// the digits, and a few digits so that the rest divides by 32) and blocks of
// Huffman-coded digits, if src ends in at least hexMinRun hex digits after at
// most hexMaxPrefix other bytes; otherwise it appends nothing and returns false.
func appendHexFrame(dst, src []byte) ([]byte, bool) {
	start := hexRunStart(src)
	if start > hexMaxPrefix || len(src)-start < hexMinRun || uint64(len(src)) > math.MaxUint32 {
		return dst, false
	}
	raw := start + (len(src)-start)%32
	// Frame header: magic number; descriptor: a 4-byte content size, single
	// segment (the window is the content), no checksum, no dictionary.
	dst = binary.LittleEndian.AppendUint32(dst, 0xFD2FB528)
	dst = append(dst, 2<<6|1<<5)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(src)))
	if raw > 0 {
		dst = appendBlockHeader(dst, false, 0, raw)
		dst = append(dst, src[:raw]...)
	}
	digits := src[raw:]
	first := len(digits) % hexBlock
	if first == 0 {
		first = hexBlock
	}
	for len(digits) > 0 {
		n := min(first, len(digits))
		first = hexBlock
		dst = appendHexBlock(dst, digits[:n], n == len(digits))
		digits = digits[n:]
	}
	return dst, true
}

// appendBlockHeader appends a block header: last block, type (0 raw, 2
// compressed) and size, in 3 little-endian bytes.
func appendBlockHeader(dst []byte, last bool, typ, size int) []byte {
	h := uint32(size)<<3 | uint32(typ)<<1
	if last {
		h |= 1
	}
	return append(dst, byte(h), byte(h>>8), byte(h>>16))
}

// appendHexBlock appends a compressed block of the digits d (a multiple of 32,
// at most hexBlock): a literals section of four Huffman streams, each a
// quarter of d, and an empty sequences section.
func appendHexBlock(dst, d []byte, last bool) []byte {
	seg := len(d) / 4
	stream := seg/2 + 1 // two digits a byte, and the byte of the end marker
	lits := len(hexTree) + 6 + 4*stream
	dst = appendBlockHeader(dst, last, 2, 5+lits+1)
	// Literals section header: compressed literals, four streams, 18-bit
	// regenerated and compressed sizes.
	h := uint64(2) | 3<<2 | uint64(len(d))<<4 | uint64(lits)<<22
	dst = append(dst, byte(h), byte(h>>8), byte(h>>16), byte(h>>24), byte(h>>32))
	dst = append(dst, hexTree...)
	for range 3 { // jump table: the first three streams' sizes
		dst = binary.LittleEndian.AppendUint16(dst, uint16(stream))
	}
	for i := range 4 {
		dst = appendHexStream(dst, d[i*seg:(i+1)*seg])
	}
	return append(dst, 0) // no sequences: the block is its literals
}

// appendHexStream appends one Huffman stream of the digits s (a multiple of 8).
// A decoder reads a stream backwards from its end marker, so the last digit
// is written first, in the lowest bits: byte k holds the codes of s[n-1-2k]
// (low nibble) and s[n-2-2k] (high nibble).
func appendHexStream(dst, s []byte) []byte {
	at := len(dst)
	dst = append(dst, make([]byte, len(s)/2+1)...)
	out := dst[at:]
	for j, k := len(s)-8, 0; j >= 0; j, k = j-8, k+4 {
		binary.LittleEndian.PutUint32(out[k:k+4], hexCodes8(binary.LittleEndian.Uint64(s[j:j+8])))
	}
	out[len(out)-1] = 1 // the end marker, above the last code
	return dst
}

// hexCodes8 packs the codes of the 8 digits in w (little-endian) into 4
// bytes, last digit first: the byte k holds the codes of digits 7-2k (low
// nibble) and 6-2k (high nibble).
func hexCodes8(w uint64) uint32 {
	const lo, low = 0x0F0F0F0F0F0F0F0F, 0x0101010101010101
	// Each digit's code: its low nibble, plus 9 for a letter (0x6_).
	l := w >> 6 & low
	v := w&lo + l<<3 + l
	// Pairs (b1,b0), (b3,b2), ...: the odd byte's code low, the even's high,
	// in each 16-bit lane; then the lanes' low bytes gathered, last pair first.
	u := v>>8&0x000F000F000F000F | v<<4&0x00F000F000F000F0
	u = (u | u>>8) & 0x0000FFFF0000FFFF
	u = (u | u>>16) & 0xFFFFFFFF
	return bits.ReverseBytes32(uint32(u))
}
