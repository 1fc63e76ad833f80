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
	if out, ok := appendHexFrame(dst[:0], src); ok {
		return out, nil
	}
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
// (no checksum, a frame even for empty input), except two. Its level is the
// fastest: the hex digests (record_id, request_sha256) that are most of the
// tables' bytes are random, so there are no matches to find, and the default
// level's search for them ran at about 80 MB/s of such pages against 470
// MB/s (table format 4; the tables as a whole are about the same size, the
// attempts table a tenth larger, the others a little smaller). And every
// block's literals are entropy-coded, also in a block with no matches, which
// zstd would otherwise store as it is: that almost halves the hex digests
// (table format 3).
func newTableEncoder() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil,
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithAllLitEntropyCompression(true),
		zstd.WithZeroFrames(true),
		zstd.WithEncoderCRC(false),
	)
}
