package ingest

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// Benchmarks of the hot paths (go test -run '^$' -bench . ./ingest/). They
// run only with -bench; the generator's lines are realistic in size and shape.

func benchLines(b *testing.B) (in, out [][]byte) {
	in, out, _ = generated(b, 4096)
	return in, out
}

func totalBytes(ls [][]byte) int64 {
	var n int64
	for _, l := range ls {
		n += int64(len(l)) + 1
	}
	return n
}

func BenchmarkParseInput(b *testing.B) {
	in, _ := benchLines(b)
	for _, fast := range []bool{true, false} {
		name := "fast"
		if !fast {
			name = "encoding_json"
		}
		b.Run(name, func(b *testing.B) {
			parse := openaiFormat{}.ParseInput
			if !fast {
				parse = generalParseInput
			}
			b.SetBytes(totalBytes(in) / int64(len(in)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := parse(in[i%len(in)], ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseResult(b *testing.B) {
	_, out := benchLines(b)
	for _, fast := range []bool{true, false} {
		name := "fast"
		if !fast {
			name = "encoding_json"
		}
		b.Run(name, func(b *testing.B) {
			parse := func(l []byte) (lake.AttemptRow, error) { return openaiFormat{}.ParseResult(l, ChannelOutput) }
			if !fast {
				parse = generalParseResult
			}
			b.SetBytes(totalBytes(out) / int64(len(out)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				parse(out[i%len(out)])
			}
		})
	}
}

// Anthropic's documented result lines (real lines, shorter than the
// generator's OpenAI ones), fast and through encoding/json alone.
func BenchmarkParseResultAnthropic(b *testing.B) {
	lines := anthropicExamples(b)
	for _, fast := range []bool{true, false} {
		name := "fast"
		parse := func(l []byte) (lake.AttemptRow, error) { return anthropicFormat{}.ParseResult(l, ChannelOutput) }
		if !fast {
			name, parse = "encoding_json", generalAnthropicResult
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(totalBytes(lines) / int64(len(lines)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				parse(lines[i%len(lines)])
			}
		})
	}
}

// Hashing per input line: the request digest over the body and the record id.
func BenchmarkHash(b *testing.B) {
	in, _ := benchLines(b)
	b.Run("request_digest", func(b *testing.B) {
		b.SetBytes(int64(len(in[0])))
		for b.Loop() {
			lake.NewFieldHasher().AddString("POST").AddString("/v1/chat/completions").Add(in[0]).Sum()
		}
	})
	b.Run("record_id", func(b *testing.B) {
		cfg := lake.HashFields("x").Hex()
		for b.Loop() {
			lake.HashFields("tenant", "bench-0000000001", "", "v1", cfg)
		}
	})
	b.Run("sha256_file_stream", func(b *testing.B) {
		data := bytes.Repeat(in[0], 1024)
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			lake.Sum(data)
		}
	})
}

// ParallelLines end to end: chunking, parsing on all cores, ordered sink.
func BenchmarkParallelLinesParseInput(b *testing.B) {
	in, _ := benchLines(b)
	data := append(bytes.Join(in, []byte{'\n'}), '\n')
	b.SetBytes(int64(len(data)))
	f := openaiFormat{}
	for b.Loop() {
		n := 0
		err := ParallelLines(context.Background(), bytes.NewReader(data), func(l Line, r *InputRecord) {
			*r, _ = f.ParseInput(l.Bytes, "")
		}, func(Line, *InputRecord) error { n++; return nil })
		if err != nil || n != len(in) {
			b.Fatal(err, n)
		}
	}
}

// BenchmarkPlanRuns sorts 200k plan records by business key in memory and
// through run files of 16k records (the external sort plan uses past
// defaultRunRecords), then reads them back in order: ns/op per record.
func BenchmarkPlanRuns(b *testing.B) {
	const n = 200_000
	recs := make([]planRec, n)
	for i := range recs {
		k := fmt.Sprintf("bench-%010d", (i*7919)%n)
		recs[i] = planRec{key: k, customID: k, line: int64(i + 1), off: int64(i) * 650, n: 649,
			req: lake.HashFields(k), rid: lake.HashFields(k, "r"), cfg: lake.HashFields("cfg")}
	}
	line := bytes.Repeat([]byte("x"), 649)
	for _, c := range []struct {
		name  string
		max   int
		lines bool // records carry their lines (an input out of key order)
	}{{"memory", n, false}, {"runs_16k", 1 << 14, false}, {"runs_16k_lines", 1 << 14, true}} {
		b.Run(c.name, func(b *testing.B) {
			var carry []byte
			if c.lines {
				carry = line
			}
			for b.Loop() {
				s := newPlanRuns(byKeyLine, c.max, defaultRunBytes, 0, b.TempDir())
				for i := range recs {
					if err := s.add(recs[i], carry); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.sort(); err != nil {
					b.Fatal(err)
				}
				var got int
				if err := s.eachLine(func(r *planRec) error {
					if c.lines && len(r.data) != len(line) {
						return fmt.Errorf("record %q carries %d bytes", r.key, len(r.data))
					}
					got++
					return nil
				}); err != nil || got != n {
					b.Fatal(err, got)
				}
				s.close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/record")
		})
	}
}
