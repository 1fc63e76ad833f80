package lake

import (
	libzstd "github.com/DataDog/zstd"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
)

// zstdCodec is the ZSTD codec of every table page. Pages of hex digests are
// written by the codec itself (appendHexFrame); every other page by the
// reference zstd library (libzstd, through cgo) at level 1, which compressed
// the attempts' answers and request ids 1.7 and 2 times as fast as the Go
// encoder parquet-go uses, at its fastest level, and a little smaller (256
// KiB pages of a 1M bench's attempts file: 408 against 244 MB/s, and 399
// against 194). Pages are decoded by the Go decoder. Its contexts are kept for
// the life of the process instead of in a sync.Pool, which every other
// garbage collection empties.
type zstdCodec struct {
	encoders chan libzstd.Ctx
	decoders chan *zstd.Decoder
}

// tableLevel is libzstd's level of the table pages: its fastest that still
// Huffman-codes the literals of every block (the negative levels store them
// as they are: request ids twice the size).
const tableLevel = 1

// tableCodec is shared by every table writer; it keeps as many contexts as
// were ever in use at once, up to its capacity.
var tableCodec = &zstdCodec{encoders: make(chan libzstd.Ctx, 8), decoders: make(chan *zstd.Decoder, 8)}

func (c *zstdCodec) String() string { return "ZSTD" }

func (c *zstdCodec) CompressionCodec() format.CompressionCodec { return format.Zstd }

func (c *zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	if out, ok := appendHexFrame(dst[:0], src); ok {
		return out, nil
	}
	var e libzstd.Ctx
	select {
	case e = <-c.encoders:
	default:
		e = libzstd.NewCtx()
	}
	out, err := e.CompressLevel(dst[:0], src, tableLevel)
	select {
	case c.encoders <- e:
	default: // more at once than the pool keeps
	}
	return out, err
}

func (c *zstdCodec) Decode(dst, src []byte) ([]byte, error) {
	var d *zstd.Decoder
	select {
	case d = <-c.decoders:
	default:
		var err error
		if d, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1)); err != nil {
			return nil, err
		}
	}
	out, err := d.DecodeAll(src, dst[:0])
	select {
	case c.decoders <- d:
	default:
	}
	return out, err
}
