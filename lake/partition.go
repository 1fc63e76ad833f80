package lake

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Partitions split one job's reconcile across processes or machines
// (reconcile --partition k/n, then --merge). The partition of a record is
// fixed by its record_id alone, so every engine computes the same split:
//
//	partition(h, n) = uint32(first 8 hex digits of h) mod n
//
// where h is the record_id (already a sha256, 64 lower-case hex digits). A
// result line belongs to its record's partition; a line whose custom_id is
// no record of the job (an unknown id) uses h = lower-case hex sha256 of the
// custom_id's UTF-8 bytes, so each unknown id lands in exactly one partition.
// The same in DuckDB (sql/partition_sources.sql), Spark and Trino:
//
//	DuckDB: CAST(('0x' || substr(h, 1, 8)) AS UBIGINT) % n
//	Spark:  pmod(CAST(conv(substr(h, 1, 8), 16, 10) AS BIGINT), n)
//	Trino:  from_base(substr(h, 1, 8), 16) % n
//
// MaxPartitions bounds n: partitions are zero-padded to four digits in keys.
const MaxPartitions = 9999

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

// HexPartition is the partition of n that a hex digest string h falls in.
// h must start with 8 hex digits; a record_id always does.
func HexPartition(h string, n int) (int, error) {
	if len(h) < 8 {
		return 0, fmt.Errorf("partition of %q: want at least 8 hex digits", h)
	}
	v, err := strconv.ParseUint(h[:8], 16, 32)
	if err != nil {
		return 0, fmt.Errorf("partition of %q: %w", h, err)
	}
	return int(v % uint64(n)), nil
}

// RecordPartition is the partition of n of a record.
func RecordPartition(recordID string, n int) (int, error) { return HexPartition(recordID, n) }

// UnknownIDPartition is the partition of n of a result line whose custom_id
// names no record of the job.
func UnknownIDPartition(customID string, n int) int {
	s := sha256.Sum256([]byte(customID))
	p, _ := HexPartition(hex.EncodeToString(s[:4]), n)
	return p
}
