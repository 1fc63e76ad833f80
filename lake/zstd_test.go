package lake

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"testing"

	pqzstd "github.com/parquet-go/parquet-go/compress/zstd"
)

// TestZstdCodecSameBytes: the kept encoders give exactly the bytes of
// parquet-go's own ZSTD codec (so table files keep their names), across
// garbage collections and reused buffers, and decode back to the input.
func TestZstdCodecSameBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 300_000)
	for i := range random {
		random[i] = byte(rng.IntN(256))
	}
	text := bytes.Repeat([]byte(`{"custom_id":"r-0001","status_code":200,"content":"the answer is 42"}`), 5000)
	ref := &pqzstd.Codec{Level: pqzstd.SpeedDefault}
	var dst []byte
	for _, tc := range []struct {
		name string
		in   []byte
	}{{"empty", nil}, {"one byte", []byte{7}}, {"text", text}, {"random", random}, {"text again", text[:1000]}} {
		want, err := ref.Encode(nil, tc.in)
		if err != nil {
			t.Fatal(err)
		}
		runtime.GC() // empties sync.Pools; tableCodec keeps its encoders
		if dst, err = tableCodec.Encode(dst, tc.in); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dst, want) {
			t.Errorf("%s: %d bytes differ from parquet-go's codec (%d bytes)", tc.name, len(dst), len(want))
		}
		back, err := tableCodec.Decode(nil, dst)
		if err != nil || !bytes.Equal(back, tc.in) {
			t.Errorf("%s: round trip: %v, %d bytes back of %d", tc.name, err, len(back), len(tc.in))
		}
	}
}
