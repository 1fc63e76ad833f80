package lake

import (
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
)

// zstdCodec is parquet-go's ZSTD codec with the encoder settings of
// newTableEncoder, its encoders kept for the life of the process instead of
// in a sync.Pool. The pool is emptied by every other garbage collection,
// and each new encoder allocates and zeroes its 8 MiB history window: at
// millions of rows that was about a tenth of ingest's cpu time.
type zstdCodec struct {
	encoders chan *zstd.Encoder
	decoders chan *zstd.Decoder
}

// tableCodec is shared by every table writer; it keeps as many encoders as
// were ever in use at once, up to its capacity.
var tableCodec = &zstdCodec{encoders: make(chan *zstd.Encoder, 8), decoders: make(chan *zstd.Decoder, 8)}

func (c *zstdCodec) String() string { return "ZSTD" }

func (c *zstdCodec) CompressionCodec() format.CompressionCodec { return format.Zstd }

func (c *zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	var e *zstd.Encoder
	select {
	case e = <-c.encoders:
	default:
		var err error
		if e, err = newTableEncoder(); err != nil {
			return nil, err
		}
	}
	out := e.EncodeAll(src, dst[:0])
	select {
	case c.encoders <- e:
	default: // more at once than the pool keeps
	}
	return out, nil
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

// newTableEncoder is the zstd encoder of table pages: parquet-go's settings
// (its default level, no checksum, a frame even for empty input), except
// that at this level zstd would store a block it finds no matches in as it
// is; entropy coding its literals almost halves the hex digests (record_id,
// request_sha256) that are most of the tables' bytes: at 1M records plan
// spends about 0.3 cpu s more, and reconcile, reading smaller files, about
// 1 cpu s less (table format 3).
func newTableEncoder() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil,
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderLevel(zstd.SpeedDefault),
		zstd.WithAllLitEntropyCompression(true),
		zstd.WithZeroFrames(true),
		zstd.WithEncoderCRC(false),
	)
}
