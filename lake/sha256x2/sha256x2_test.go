package sha256x2

import (
	"bytes"
	"crypto/sha256"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// both runs f with the SHA extensions (where this machine has them) and
// with the portable code.
func both(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	saved := Accelerated
	t.Cleanup(func() { Accelerated = saved })
	for _, acc := range []bool{true, false} {
		name := "portable"
		if acc {
			if !saved {
				t.Log("no SHA extensions here: only the portable code runs")
				continue
			}
			name = "accelerated"
		}
		Accelerated = acc
		t.Run(name, f)
	}
}

func message(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Every pair of lengths across the padding's edges (55, 56, 63, 64, 119,
// 120 ...) and several blocks apart gives crypto/sha256's digests.
func TestSum256x2(t *testing.T) {
	both(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for la := 0; la <= 200; la++ {
			for _, lb := range []int{0, 1, 55, 56, 63, 64, 65, 119, 120, 128, la, la + 64, 3*la + 7} {
				a, b := message(r, la), message(r, lb)
				da, db := Sum256x2(a, b)
				if da != sha256.Sum256(a) || db != sha256.Sum256(b) {
					t.Fatalf("lengths %d and %d: digests differ from crypto/sha256", la, lb)
				}
			}
		}
	})
}

// Two streams written in pieces of any sizes, alone or together, give the
// digests of their concatenations, at every point along the way.
func TestWrite2Streams(t *testing.T) {
	both(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 4))
		for round := range 200 {
			a, b := New(), New()
			var ma, mb []byte
			for range 1 + r.IntN(20) {
				pa := message(r, r.IntN(300))
				pb := message(r, r.IntN(300))
				switch r.IntN(3) {
				case 0:
					Write2(a, pa, b, pb)
				case 1:
					a.Write(pa)
					b.Write(pb)
				case 2:
					Write2(b, pb, a, pa)
				}
				ma, mb = append(ma, pa...), append(mb, pb...)
				da, db := Sum2(a, b)
				if da != sha256.Sum256(ma) || db != sha256.Sum256(mb) {
					t.Fatalf("round %d, after %d and %d bytes: digests differ from crypto/sha256", round, len(ma), len(mb))
				}
				if a.Sum256() != da || !bytes.Equal(b.Sum(nil), db[:]) {
					t.Fatalf("round %d: Sum256 and Sum disagree with Sum2", round)
				}
			}
			a.Reset()
			if a.Sum256() != sha256.Sum256(nil) {
				t.Fatal("Reset does not start again")
			}
		}
	})
}

// Large inputs take the long paired runs of blocks, each message's own
// tail included.
func TestLarge(t *testing.T) {
	both(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(5, 6))
		a, b := message(r, 1<<20+13), message(r, 3<<19+61)
		da, db := Sum256x2(a, b)
		if da != sha256.Sum256(a) || db != sha256.Sum256(b) {
			t.Fatal("digests of 1 MiB messages differ from crypto/sha256")
		}
	})
}

func FuzzSum256x2(f *testing.F) {
	f.Add([]byte("abc"), []byte(""), uint8(0))
	f.Add(bytes.Repeat([]byte{'x'}, 119), bytes.Repeat([]byte{'y'}, 56), uint8(64))
	f.Fuzz(func(t *testing.T, a, b []byte, cut uint8) {
		da, db := Sum256x2(a, b)
		if da != sha256.Sum256(a) || db != sha256.Sum256(b) {
			t.Fatal("digests differ from crypto/sha256")
		}
		c := min(int(cut), len(a), len(b))
		sa, sb := New(), New()
		Write2(sa, a[:c], sb, b[:c])
		Write2(sa, a[c:], sb, b[c:])
		if da2, db2 := Sum2(sa, sb); da2 != da || db2 != db {
			t.Fatal("streamed digests differ")
		}
	})
}

// block_amd64.s is what gen.go writes.
func TestGenerated(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the generated file is amd64's")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to run gen.go")
	}
	out := filepath.Join(t.TempDir(), "block_amd64.s")
	if msg, err := exec.Command(gobin, "run", "gen.go", out).CombinedOutput(); err != nil {
		t.Fatalf("go run gen.go: %v\n%s", err, msg)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("block_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("block_amd64.s is not gen.go's output: run go generate ./lake/sha256x2/")
	}
}

var sink [Size]byte

func benchPairs(b *testing.B, n int) {
	r := rand.New(rand.NewPCG(7, 8))
	x, y := message(r, n), message(r, n)
	b.Run("crypto-sha256", func(b *testing.B) {
		b.SetBytes(int64(2 * n))
		for b.Loop() {
			sink = sha256.Sum256(x)
			sink = sha256.Sum256(y)
		}
	})
	b.Run("x2", func(b *testing.B) {
		b.SetBytes(int64(2 * n))
		for b.Loop() {
			sink, sink = Sum256x2(x, y)
		}
	})
}

func BenchmarkRequest(b *testing.B) { benchPairs(b, 650) }
func BenchmarkChunk(b *testing.B)   { benchPairs(b, 1<<20) }
