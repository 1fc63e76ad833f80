package gen

import (
	"context"
	"io"
	"testing"
)

// BenchmarkGenerate measures the whole pipeline (render on all cores, write
// in order) into io.Discard; bytes/s is over all three files.
func BenchmarkGenerate(b *testing.B) {
	o := DefaultOptions(100_000, 1)
	var total int64
	b.ReportAllocs()
	for b.Loop() {
		t, err := Generate(context.Background(), Writers{io.Discard, io.Discard, io.Discard}, o)
		if err != nil {
			b.Fatal(err)
		}
		total = t.Bytes.Input + t.Bytes.Output + t.Bytes.Errors
	}
	b.SetBytes(total)
	b.ReportMetric(float64(o.N)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkRenderBlock measures one worker rendering one block: the hot path.
func BenchmarkRenderBlock(b *testing.B) {
	o := DefaultOptions(1_000_000, 1)
	var br blockResult
	var specs []lineSpec
	blocks := uint64(o.N) / uint64(o.Block)
	b.ReportAllocs()
	pos := uint64(0)
	var bytes int64
	for b.Loop() {
		specs = o.renderBlock(&br, pos%blocks, blocks, specs[:0])
		bytes = int64(len(br.in) + len(br.out) + len(br.errs))
		pos++
	}
	b.SetBytes(bytes)
}

func BenchmarkAppendInput(b *testing.B) {
	o := DefaultOptions(1_000_000, 1)
	var buf []byte
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		buf = appendInput(buf[:0], &o, i)
		i++
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkAppendSuccess(b *testing.B) {
	o := DefaultOptions(1_000_000, 1)
	var buf []byte
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		buf = appendResult(buf[:0], &o, i, kindOK, o.IDPrefix)
		i++
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkPlan(b *testing.B) {
	o := DefaultOptions(1_000_000, 1)
	i := uint64(0)
	for b.Loop() {
		_ = o.plan(i)
		i++
	}
}
