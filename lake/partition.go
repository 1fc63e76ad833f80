package lake

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/batchlake/batchlake/lake/sha256x2"
)

// Partitions split one job's reconcile across processes or machines
// (reconcile --partition k/n, then --merge). A record and its result lines
// are joined by custom_id, so the partition of each is fixed by the
// custom_id alone, the same for the record and every line that names it —
// and for a line whose custom_id is no record of the job (an unknown id),
// which lands in exactly one partition too. Each engine computes the same
// split:
//
//	h = uint32(first 8 hex digits of lower-case hex sha256(custom_id's UTF-8 bytes))
//	partition(h, n) = floor(h * n / 2^32)
//
// Partitions are ranges of h: partition k of n holds k*2^32/n <= h <
// (k+1)*2^32/n. That is what lets a partition read only its share of a
// large job: plan and ingest store its expected and attempts tables as
// Splits (SplitBuckets files, file b holding the rows of partition b of
// SplitBuckets), and a partition reads only the files whose range meets its
// own. In DuckDB (sql/partition_sources.sql), Spark and Trino:
//
//	DuckDB: (CAST(('0x' || substr(sha256(custom_id), 1, 8)) AS UBIGINT) * n) // 4294967296
//	Spark:  CAST(conv(substr(sha2(custom_id, 256), 1, 8), 16, 10) AS BIGINT) * n div 4294967296
//	Trino:  from_base(substr(lower(to_hex(sha256(to_utf8(custom_id)))), 1, 8), 16) * n / 4294967296
//
// Quarantined lines carry no trustworthy id: partition 0 counts them all.
//
// MaxPartitions bounds n: partitions are zero-padded to four digits in keys.
const MaxPartitions = 9999

// SplitBuckets is how many files plan splits a large job's expected table
// into (one file per partition of SplitBuckets), and ingest a large result
// file's attempts (a smaller one's into fewer: ingest.AttemptsSplit): a
// partition of n reads about 1/n + 1/SplitBuckets of them.
const SplitBuckets = 16

// Partition is partition K of N, 0 <= K < N.
type Partition struct{ K, N int }

// ParsePartition reads "k/n" (0-based k: the partitions of 4 are 0/4 … 3/4).
func ParsePartition(s string) (Partition, error) {
	ks, ns, ok := strings.Cut(strings.TrimSpace(s), "/")
	k, err1 := strconv.Atoi(ks)
	n, err2 := strconv.Atoi(ns)
	if !ok || err1 != nil || err2 != nil {
		return Partition{}, fmt.Errorf("partition %q: want k/n, e.g. 0/4", s)
	}
	p := Partition{K: k, N: n}
	return p, p.Valid()
}

// Valid reports why p is not a partition, or nil.
func (p Partition) Valid() error {
	if p.N < 1 || p.N > MaxPartitions {
		return fmt.Errorf("partition %d/%d: want 1 <= n <= %d", p.K, p.N, MaxPartitions)
	}
	if p.K < 0 || p.K >= p.N {
		return fmt.Errorf("partition %d/%d: want 0 <= k < n (k counts from 0: the partitions of %d are 0/%d … %d/%d)", p.K, p.N, p.N, p.N, p.N-1, p.N)
	}
	return nil
}

func (p Partition) String() string { return fmt.Sprintf("%d/%d", p.K, p.N) }

// IDHash is h of a custom_id: the first four bytes of its sha256, big-endian
// (the first 8 hex digits of the digest).
func IDHash(customID string) uint32 {
	s := sha256.Sum256([]byte(customID))
	return binary.BigEndian.Uint32(s[:4])
}

// IDHash2 is IDHash of two custom_ids, hashed together (sha256x2) in about
// the time of one.
func IDHash2(a, b string) (uint32, uint32) {
	da, db := sha256x2.Sum256x2(unsafe.Slice(unsafe.StringData(a), len(a)), unsafe.Slice(unsafe.StringData(b), len(b)))
	return binary.BigEndian.Uint32(da[:4]), binary.BigEndian.Uint32(db[:4])
}

// HashPartition is the partition of n that hash h falls in.
func HashPartition(h uint32, n int) int { return int(uint64(h) * uint64(n) >> 32) }

// IDPartition is the partition of n of a record, or of a result line, with
// this custom_id.
func IDPartition(customID string, n int) int { return HashPartition(IDHash(customID), n) }

// lowest is the least hash in partition k of n: ceil(k * 2^32 / n).
func lowest(k, n int) uint64 { return (uint64(k)<<32 + uint64(n) - 1) / uint64(n) }

// Meets says whether file bucket b of split holds rows of p; Within whether
// it holds no other rows. Bucket b of split is partition b of split, so both
// compare the hash ranges of the two partitions.
func (p Partition) Meets(b, split int) bool {
	lo, hi := lowest(b, split), lowest(b+1, split)-1 // the bucket's hashes
	return HashPartition(uint32(lo), p.N) <= p.K && p.K <= HashPartition(uint32(hi), p.N)
}

// Within says whether every row of file bucket b of split is in p.
func (p Partition) Within(b, split int) bool {
	lo, hi := lowest(b, split), lowest(b+1, split)-1
	return HashPartition(uint32(lo), p.N) == p.K && HashPartition(uint32(hi), p.N) == p.K
}

// TableFile is one file of a table as a marker names it. Split 0 is a file
// of any rows; otherwise the file holds only the rows of bucket Bucket of
// Split (partition Bucket of Split by IDHash of their custom_id).
type TableFile struct {
	Key           string
	Bucket, Split int
}

// Reads says whether partition p reads f, and whether every row of f is
// p's (so it need not filter them).
func (p Partition) Reads(f TableFile) (read, whole bool) {
	if f.Split <= 1 {
		return true, p.N == 1
	}
	return p.Meets(f.Bucket, f.Split), p.Within(f.Bucket, f.Split)
}

// tableFiles pairs keys with their buckets (none when split is 0).
func tableFiles(keys []string, buckets []int, split int) []TableFile {
	out := make([]TableFile, len(keys))
	for i, k := range keys {
		out[i] = TableFile{Key: k}
		if split > 1 && i < len(buckets) {
			out[i].Bucket, out[i].Split = buckets[i], split
		}
	}
	return out
}

// checkSplit reports what is wrong with a marker's split files, or "".
func checkSplit(what string, keys []string, buckets []int, split int) string {
	switch {
	case split == 0 && len(buckets) == 0:
		return ""
	case split < 2 || split > MaxPartitions:
		return fmt.Sprintf("%s split %d: want 2..%d", what, split, MaxPartitions)
	case len(buckets) != len(keys):
		return fmt.Sprintf("%s: %d files, %d buckets", what, len(keys), len(buckets))
	}
	for i, b := range buckets {
		if b < 0 || b >= split || (i > 0 && b <= buckets[i-1]) {
			return fmt.Sprintf("%s buckets %v: want increasing buckets of 0..%d", what, buckets, split-1)
		}
	}
	return ""
}
