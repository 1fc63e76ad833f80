package lake

import (
	"bytes"
	"context"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	libzstd "github.com/DataDog/zstd"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
)

// hexPage is a page like parquet-go's of n hex digits after a header of
// prefix bytes (DELTA_LENGTH_BYTE_ARRAY: the lengths, then the values).
func hexPage(rng *rand.Rand, prefix, n int) []byte {
	p := make([]byte, prefix, prefix+n)
	for i := range p {
		p[i] = byte(rng.IntN(256))
	}
	raw := make([]byte, (n+1)/2)
	for i := range raw {
		raw[i] = byte(rng.IntN(256))
	}
	return append(p, hex.EncodeToString(raw)[:n]...)
}

// TestHexFrame: pages that end in hex digits after a short header are
// written as Huffman-coded frames that the zstd decoder parquet-go uses
// reads back exactly, at about half their size; other pages are left to the
// encoder (and the codec gives them exactly its bytes).
func TestHexFrame(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	for _, tc := range []struct {
		name        string
		prefix, n   int
		hexFrame    bool
		replaceWith byte // if set, one digit becomes this byte
		at          int
	}{
		{"digests, short header", 17, 64 * 4000, true, 0, 0},
		{"digests, no header", 0, 64 * 4000, true, 0, 0},
		{"one block exactly", 0, hexBlock, true, 0, 0},
		{"a block and 32 digits", 5, hexBlock + 32, true, 0, 0},
		{"a block and 31 digits", 5, hexBlock + 31, true, 0, 0},
		{"three blocks and an odd tail", 4096, 3*hexBlock + 12345, true, 0, 0},
		{"shortest run", 3, hexMinRun, true, 0, 0},
		{"run too short", 3, hexMinRun - 1, false, 0, 0},
		{"header too long", hexMaxPrefix + 1, 64 * 100, false, 0, 0},
		{"upper-case digit late", 10, 64 * 100, false, 'A', 64*100 - 700},
		{"upper-case digit early", 10, 64 * 100, true, 'A', 10},
		{"a letter past f", 10, 64 * 200, false, 'g', 64 * 100},
		{"a colon (after 9)", 10, 64 * 200, false, ':', 64 * 100},
		{"a slash (before 0)", 10, 64 * 200, false, '/', 64 * 100},
		{"a backtick (before a)", 10, 64 * 200, false, '`', 64 * 100},
		{"high byte", 10, 64 * 200, false, 0xE1, 64 * 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := hexPage(rng, tc.prefix, tc.n)
			if tc.replaceWith != 0 {
				src[tc.prefix+tc.at] = tc.replaceWith
			}
			got, ok := appendHexFrame(nil, src)
			if ok != tc.hexFrame {
				t.Fatalf("hex frame %v, want %v", ok, tc.hexFrame)
			}
			enc, err := tableCodec.Encode(nil, src)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				if want := compressPage(t, src); !bytes.Equal(enc, want) {
					t.Fatalf("not a hex page, but the codec's %d bytes are not libzstd's %d", len(enc), len(want))
				}
			} else if !bytes.Equal(enc, got) {
				t.Fatal("the codec did not write the hex frame")
			}
			back, err := dec.DecodeAll(enc, nil)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !bytes.Equal(back, src) {
				t.Fatalf("decoded %d bytes differ from the %d written", len(back), len(src))
			}
			// Half the digits, and per block at most 80 bytes of headers and tree.
			if blocks := 2 + tc.n/hexBlock; ok && len(enc) > tc.prefix+32+tc.n/2+80*blocks {
				t.Errorf("%d digits after %d bytes took %d bytes, want about half", tc.n, tc.prefix, len(enc))
			}
		})
	}
}

// TestHexFrameEverySymbolPlace: each of the 16 digits at each place of a
// segment decodes to itself (a code off by one, or two digits of a byte
// swapped, would not).
func TestHexFrameEverySymbolPlace(t *testing.T) {
	dec, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	defer dec.Close()
	const digits = "0123456789abcdef"
	src := make([]byte, 0, 16*17*8)
	for i := range 16 * 17 * 8 {
		src = append(src, digits[(i*7+i/16)%16])
	}
	enc, ok := appendHexFrame(nil, src)
	if !ok {
		t.Fatal("no hex frame")
	}
	back, err := dec.DecodeAll(enc, nil)
	if err != nil || !bytes.Equal(back, src) {
		t.Fatalf("round trip: %v\n got %q\nwant %q", err, back, src)
	}
}

func TestAllHex8(t *testing.T) {
	for c := range 256 {
		for place := range 8 {
			w := []byte("00000000")
			w[place] = byte(c)
			var v uint64
			for i := 7; i >= 0; i-- {
				v = v<<8 | uint64(w[i])
			}
			if got, want := allHex8(v), hexDigit(byte(c)); got != want {
				t.Fatalf("byte %#x at %d: allHex8 %v, want %v", c, place, got, want)
			}
		}
	}
}

// FuzzHexFrame: whatever a page holds, the codec's frame decodes to it.
func FuzzHexFrame(f *testing.F) {
	f.Add([]byte{1, 2, 3}, uint16(2000), uint64(1))
	f.Add([]byte{}, uint16(1024), uint64(2))
	dec, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	f.Fuzz(func(t *testing.T, prefix []byte, n uint16, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 0))
		src := append(append([]byte(nil), prefix...), hexPage(rng, 0, int(n))...)
		if len(prefix) > 0 && n%3 == 0 { // one of the prefix's bytes among the digits too
			src[int(seed%uint64(len(src)))] = prefix[0]
		}
		want := len(src)
		for want > 0 && hexDigit(src[want-1]) {
			want--
		}
		if got := hexRunStart(src); got != want {
			t.Fatalf("hexRunStart %d, want %d", got, want)
		}
		enc, err := tableCodec.Encode(nil, src)
		if err != nil {
			t.Fatal(err)
		}
		back, err := dec.DecodeAll(enc, nil)
		if err != nil || !bytes.Equal(back, src) {
			t.Fatalf("round trip of %d bytes: %v", len(src), err)
		}
	})
}

func BenchmarkHexPage(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	src := hexPage(rng, 40, 64*4096)
	ref := libzstd.NewCtx()
	b.Run("zstd", func(b *testing.B) {
		var dst []byte
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			dst, _ = ref.CompressLevel(dst[:0], src, tableLevel)
		}
		b.ReportMetric(float64(len(dst)), "bytes")
	})
	b.Run("hex", func(b *testing.B) {
		var dst []byte
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			dst, _ = appendHexFrame(dst[:0], src)
		}
		b.ReportMetric(float64(len(dst)), "bytes")
	})
}

// TestTablePagesOfDigestsAreHexFrames: a table's record_id pages, as the
// writer lays them out (a header of lengths, then the digits), take the hex
// frame, not the zstd encoder: each frame's blocks carry hexTree, and the
// rows read back equal. A change of page layout or detection that sent them
// back to the encoder would leave the readers' tests testing plain zstd.
func TestTablePagesOfDigestsAreHexFrames(t *testing.T) {
	ctx := context.Background()
	l := openFile(t)
	type row struct {
		RecordID string `parquet:"record_id"`
		N        int64  `parquet:"n,delta"`
	}
	rows := make([]row, 20000)
	for i := range rows {
		rows[i] = row{RecordID: HashFields(strconv.Itoa(i)).Hex(), N: int64(i)}
	}
	rel, err := WriteTable(ctx, l, t.TempDir(), "expected", "t", HashFields("job"), rows)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(l.LocalPath(rel))
	if err != nil {
		t.Fatal(err)
	}
	// 20,000 digests are 1.28 MB of digits: at least 5 pages of 256 KiB, and
	// a block of at most 128 KiB each.
	if n := bytes.Count(raw, hexTree); n < 10 {
		t.Fatalf("the file holds %d hex blocks, want at least 10", n)
	}
	back, err := parquet.ReadFile[row](l.LocalPath(rel))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(rows) {
		t.Fatalf("read %d rows back of %d", len(back), len(rows))
	}
	for i := range rows {
		if back[i] != rows[i] {
			t.Fatalf("row %d: %+v, want %+v", i, back[i], rows[i])
		}
	}
}
