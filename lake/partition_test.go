package lake

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func TestParsePartition(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Partition
		err  string
	}{
		{"0/1", Partition{0, 1}, ""},
		{"3/4", Partition{3, 4}, ""},
		{" 2/7 ", Partition{2, 7}, ""},
		{"4/4", Partition{}, "0 <= k < n"},
		{"-1/4", Partition{}, "0 <= k < n"},
		{"0/0", Partition{}, "1 <= n"},
		{"0/10000", Partition{}, "1 <= n"},
		{"1", Partition{}, "want k/n"},
		{"a/b", Partition{}, "want k/n"},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParsePartition(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("ParsePartition(%q) = %v, %v; want error with %q", c.in, got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("ParsePartition(%q) = %v, %v; want %v", c.in, got, err, c.want)
			}
			if got.String() != strings.TrimSpace(c.in) {
				t.Errorf("String() = %q", got.String())
			}
		})
	}
}

func TestIDPartition(t *testing.T) {
	for _, c := range []struct {
		h    uint32
		n    int
		want int
	}{
		{0, 7, 0},
		{1<<31 - 1, 2, 0},
		{1 << 31, 2, 1},
		{1<<32 - 1, 1000, 999},
		{1<<32 - 1, 1, 0},
		{0x0a0000ff, 7, 0}, // 167772415 * 7 / 2^32 = 0.27
		{0x40000000, 4, 1},
		{0x3fffffff, 4, 0},
	} {
		if got := HashPartition(c.h, c.n); got != c.want {
			t.Errorf("HashPartition(%#x, %d) = %d, want %d", c.h, c.n, got, c.want)
		}
	}
	// IDPartition hashes the custom_id as docs/engines.md says: the first 8
	// hex digits of its sha256, scaled to n.
	for _, id := range []string{"stranger-1", "row-000042", ""} {
		s := sha256.Sum256([]byte(id))
		h, err := strconv.ParseUint(hex.EncodeToString(s[:])[:8], 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 2, 3, 8, 9999} {
			if got, want := IDPartition(id, n), int(h*uint64(n)/(1<<32)); got != want {
				t.Errorf("IDPartition(%q, %d) = %d, want %d", id, n, got, want)
			}
		}
	}
}

// TestPartitionReads: a partition reads every split file that holds a row of
// it (Meets), and reads whole (Within) only files of none but its rows, for
// every split and partition count; with the split a multiple of n each
// partition reads exactly split/n files, all whole.
func TestPartitionReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, split := range []int{2, 3, 16, 100} {
		for _, n := range []int{1, 2, 3, 7, 8, 16, 17, 9999} {
			for range 2000 {
				h := rng.Uint32()
				k, b := HashPartition(h, n), HashPartition(h, split)
				if !(Partition{k, n}).Meets(b, split) {
					t.Fatalf("hash %#x: partition %d/%d does not read bucket %d/%d, which holds it", h, k, n, b, split)
				}
				other := Partition{(k + 1 + rng.IntN(n)) % n, n}
				if other.K != k && other.Within(b, split) {
					t.Fatalf("hash %#x: partition %s reads bucket %d/%d whole, which holds a row of partition %d", h, other, b, split, k)
				}
			}
			if split%n == 0 {
				for k := range n {
					p := Partition{k, n}
					var files, whole int
					for b := range split {
						if read, all := p.Reads(TableFile{Key: "x", Bucket: b, Split: split}); read {
							files++
							if all {
								whole++
							}
						}
					}
					if files != split/n || whole != files {
						t.Errorf("partition %s of a split of %d reads %d files (%d whole), want %d whole", p, split, files, whole, split/n)
					}
				}
			}
		}
	}
	// An unsplit file is read, and filtered unless n is 1.
	if read, all := (Partition{1, 2}).Reads(TableFile{Key: "x"}); !read || all {
		t.Errorf("unsplit file, partition 1/2: read %v whole %v", read, all)
	}
	if read, all := (Partition{0, 1}).Reads(TableFile{Key: "x"}); !read || !all {
		t.Errorf("unsplit file, partition 0/1: read %v whole %v", read, all)
	}
}

func TestPartitionKey(t *testing.T) {
	job, run := Sum([]byte("job")), Sum([]byte("run"))
	p := Partition{K: 12, N: 100}
	k := PartitionKey(job, run, p)
	if want := "partitions/" + job.Hex() + "/" + run.Hex() + "/0012-of-0100.json"; k != want {
		t.Fatalf("PartitionKey = %s, want %s", k, want)
	}
	j, r, q, ok := ParsePartitionKey(k)
	if !ok || j != job || r != run || q != p {
		t.Fatalf("ParsePartitionKey(%s) = %v %v %v %v", k, j, r, q, ok)
	}
	for _, bad := range []string{
		"partitions/" + job.Hex() + "/" + run.Hex() + "/12-of-100.json",
		"partitions/" + job.Hex() + "/" + run.Hex() + "/0100-of-0100.json",
		"partitions/" + job.Hex() + "/" + run.Hex() + "/0001-of-0002.json.tmp",
		"partitions/" + job.Hex() + "/0001-of-0002.json",
		"reports/" + job.Hex() + "/" + run.Hex() + "/0001-of-0002.json",
	} {
		if _, _, _, ok := ParsePartitionKey(bad); ok {
			t.Errorf("ParsePartitionKey accepted %s", bad)
		}
	}
}

// IDHash2 is IDHash of each of its two ids, whatever their lengths (one
// block, two, unequal, empty).
func TestIDHash2(t *testing.T) {
	ids := []string{"", "a", "bench-0000587276", strings.Repeat("x", 55), strings.Repeat("y", 56), strings.Repeat("z", 64), strings.Repeat("é", 100)}
	for _, a := range ids {
		for _, b := range ids {
			ha, hb := IDHash2(a, b)
			if ha != IDHash(a) || hb != IDHash(b) {
				t.Errorf("IDHash2(%q, %q) = %08x, %08x; want %08x, %08x", a, b, ha, hb, IDHash(a), IDHash(b))
			}
		}
	}
}

// The bucket hashes of a split table's rows, one id at a time and two.
func BenchmarkIDHash(b *testing.B) {
	ids := make([]string, 4096)
	for i := range ids {
		ids[i] = "bench-" + strconv.Itoa(1000000+i)
	}
	b.Run("one", func(b *testing.B) {
		var s uint32
		for i := 0; b.Loop(); i++ {
			s += IDHash(ids[i%len(ids)])
		}
		_ = s
	})
	b.Run("two", func(b *testing.B) {
		var s uint32
		for i := 0; b.Loop(); i += 2 {
			x, y := IDHash2(ids[i%len(ids)], ids[(i+1)%len(ids)])
			s += x + y
		}
		_ = s
	})
}
