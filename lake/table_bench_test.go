package lake

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkTableWriter writes attempt-like rows (800-byte output text, a
// quarter of the columns dictionary-encoded) through the lake's Parquet
// writer settings. Run with: go test -run '^$' -bench TableWriter ./lake/
func BenchmarkTableWriter(b *testing.B) {
	const n = 100_000
	text := make([]byte, 800)
	for i := range text {
		text[i] = "abcdefghij klmnopqrstuvwxyz."[i%28]
	}
	rows := make([]AttemptRow, 4096)
	code := int32(200)
	for i := range rows {
		rows[i] = AttemptRow{JobKey: "7dda4eaf65c23242c37f0ac4b3cb7392f912db483d69ea1a98cf19582dc72d96", Tenant: "bench", Provider: "openai",
			ProviderRequestID: fmt.Sprintf("req_%032x", i), CustomID: fmt.Sprintf("bench-%010d", i), Channel: "output",
			RawSHA256: "4626ec7d904fcb00b58954057281009f72c5f36df1348b7b495a3b8f29fbce70", LineNo: int64(i + 1), StatusCode: &code,
			Outcome: "success", ModelVersion: "gpt-4o-mini-2024-07-18", InputTokens: 128, OutputTokens: 200, FinishReason: "stop",
			HasOutput: true, OutputText: string(text[i%100:])}
	}
	ctx := context.Background()
	l, err := Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	var job Digest
	b.SetBytes(n * 900)
	b.ReportAllocs()
	for b.Loop() {
		w, err := NewTableWriter[AttemptRow](l, b.TempDir(), "attempts", "bench", job)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < n; i += len(rows) {
			if err := w.Write(rows[:min(len(rows), n-i)]...); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := w.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
