package lake

import (
	"crypto/sha256"
	"encoding/hex"
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

func TestHexPartition(t *testing.T) {
	for _, c := range []struct {
		h    string
		n    int
		want int
	}{
		{"00000000ffff", 7, 0},
		{"0a0000ff", 7, 167772415 % 7},
		{"ffffffff" + strings.Repeat("0", 56), 1000, 4294967295 % 1000},
		{"FFFFFFFF", 2, 1}, // upper case parses too
	} {
		if got, err := HexPartition(c.h, c.n); err != nil || got != c.want {
			t.Errorf("HexPartition(%q, %d) = %d, %v; want %d", c.h, c.n, got, err, c.want)
		}
	}
	if _, err := HexPartition("abc", 2); err == nil {
		t.Error("short hex accepted")
	}
	if _, err := HexPartition("zzzzzzzz", 2); err == nil {
		t.Error("non-hex accepted")
	}
	s := sha256.Sum256([]byte("stranger-1"))
	want, _ := HexPartition(hex.EncodeToString(s[:]), 3)
	if got := UnknownIDPartition("stranger-1", 3); got != want {
		t.Errorf("UnknownIDPartition = %d, want %d", got, want)
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
