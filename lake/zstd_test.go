package lake

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"testing"

	libzstd "github.com/DataDog/zstd"
)

// TestZstdCodecSameBytes: the kept contexts give exactly the bytes of a
// fresh one at the same level, or of appendHexFrame for a page of hex
// digits (so table files keep their names),
// across garbage collections and reused buffers, and decode back to the
// input; hex digests, most of a table's bytes, compress to under 60 %.
func TestZstdCodecSameBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 300_000)
	for i := range random {
		random[i] = byte(rng.IntN(256))
	}
	var digests []byte
	for range 4096 {
		var d Digest
		for i := range d {
			d[i] = byte(rng.IntN(256))
		}
		digests = append(digests, d.Hex()...)
	}
	text := bytes.Repeat([]byte(`{"custom_id":"r-0001","status_code":200,"content":"the answer is 42"}`), 5000)
	var dst []byte
	for _, tc := range []struct {
		name string
		in   []byte
	}{{"empty", nil}, {"one byte", []byte{7}}, {"text", text}, {"random", random}, {"hex digests", digests}, {"text again", text[:1000]}} {
		want, hexFrame := appendHexFrame(nil, tc.in)
		if !hexFrame {
			want = compressPage(t, tc.in)
		}
		runtime.GC() // empties sync.Pools; tableCodec keeps its contexts
		var err error
		if dst, err = tableCodec.Encode(dst, tc.in); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dst, want) {
			t.Errorf("%s: %d bytes differ from a fresh context's (%d bytes)", tc.name, len(dst), len(want))
		}
		if tc.name == "hex digests" && len(dst) > len(tc.in)*6/10 {
			t.Errorf("hex digests: %d bytes compressed to %d, want under 60 %%", len(tc.in), len(dst))
		}
		back, err := tableCodec.Decode(nil, dst)
		if err != nil || !bytes.Equal(back, tc.in) {
			t.Errorf("%s: round trip: %v, %d bytes back of %d", tc.name, err, len(back), len(tc.in))
		}
	}
}

// compressPage is what the codec gives a page that is not hex digits: a
// frame of libzstd at tableLevel, from a fresh context.
func compressPage(t testing.TB, src []byte) []byte {
	t.Helper()
	out, err := libzstd.CompressLevel(nil, src, tableLevel)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
