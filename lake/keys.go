package lake

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Every object key in the lake is built here. Keys never contain user text
// other than a validated tenant name and validated shard ids.
//
//	objects/sha256/ab/<hex>                         raw files, shards, retry files (content-addressed)
//	tables/<table>/tenant=<t>/job=<job>/<hex>.parquet  Parquet table files, named by their sha256
//	manifests/<job>.json                            job manifest (commit marker of plan)
//	ingests/<job>/<channel>-<rawhex>.json           ingest record (commit marker of ingest)
//	retractions/<job>/<rawhex>.json                 retraction of an ingested raw file (ingest --retract)
//	reports/<job>/<reconcile-key-hex>.json          reconcile report (commit marker of reconcile)
//	partitions/<job>/<reconcile-key-hex>/<kkkk>-of-<nnnn>.json  result of reconcile --partition k/n
//	ledger/<job>/<shard>/<seq>.json                 ledger events, seq zero-padded to 10 digits
//	ledger/<job>/<shard>/batches/<sha256(id)>.json  batches made for the shard beside the bound one

var (
	tenantRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	shardRe  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	tableRe  = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)
)

// JobShard is the pseudo shard id under which job-wide ledger events live.
const JobShard = "_job"

// ValidTenant reports why a tenant name cannot be used in the lake, or nil.
// Tenants become Hive partition values, so they are restricted to a safe alphabet.
func ValidTenant(t string) error {
	if !tenantRe.MatchString(t) || strings.Contains(t, "..") {
		return fmt.Errorf("tenant %q: want 1-64 characters of [A-Za-z0-9._-], starting with a letter or digit, without '..'", t)
	}
	return nil
}

// ValidShardID reports why a shard id cannot be used in a key, or nil.
func ValidShardID(s string) error {
	if s == JobShard {
		return nil
	}
	if !shardRe.MatchString(s) || strings.Contains(s, "..") {
		return fmt.Errorf("shard id %q: want 1-64 characters of [A-Za-z0-9._-]", s)
	}
	return nil
}

// ObjectKey is the key of a content-addressed object.
func ObjectKey(d Digest) string {
	h := d.Hex()
	return "objects/sha256/" + h[:2] + "/" + h
}

// TablePrefix is the prefix under which all files of a table live.
func TablePrefix(table string) string { return "tables/" + table + "/" }

// TableFileKey is the key of one Parquet file of a table, Hive-partitioned by
// tenant and job and named by its content digest.
func TableFileKey(table, tenant string, job Digest, file Digest) string {
	if !tableRe.MatchString(table) {
		panic(fmt.Sprintf("lake: bad table name %q", table))
	}
	if err := ValidTenant(tenant); err != nil {
		panic("lake: " + err.Error())
	}
	return TablePrefix(table) + "tenant=" + tenant + "/job=" + job.Hex() + "/" + file.Hex() + ".parquet"
}

// ManifestPrefix is the prefix of all manifests.
const ManifestPrefix = "manifests/"

// ManifestKey is the key of a job's manifest.
func ManifestKey(job Digest) string { return ManifestPrefix + job.Hex() + ".json" }

// IngestPrefix is the prefix of a job's ingest records.
func IngestPrefix(job Digest) string { return IngestArea + job.Hex() + "/" }

// IngestKey is the key of the ingest record of one raw file in one channel.
func IngestKey(job Digest, channel string, raw Digest) string {
	return IngestPrefix(job) + channel + "-" + raw.Hex() + ".json"
}

// RetractionArea is the top-level folder of retraction markers.
const RetractionArea = "retractions/"

// RetractionPrefix is the prefix of a job's retraction markers.
func RetractionPrefix(job Digest) string { return RetractionArea + job.Hex() + "/" }

// RetractionKey is the key of the marker that retracts raw file raw (every
// channel it was ingested on) from job.
func RetractionKey(job, raw Digest) string { return RetractionPrefix(job) + raw.Hex() + ".json" }

// ParseRetractionKey splits a retraction key into its job and raw file. It
// accepts exactly the keys RetractionKey builds.
func ParseRetractionKey(key string) (job, raw Digest, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 3 || parts[0]+"/" != RetractionArea {
		return job, raw, false
	}
	name, found := strings.CutSuffix(parts[2], ".json")
	var err error
	if job, err = ParseDigest(parts[1]); err != nil || job.Hex() != parts[1] || !found {
		return job, raw, false
	}
	if raw, err = ParseDigest(name); err != nil || raw.Hex() != name {
		return job, raw, false
	}
	return job, raw, true
}

// ParseTableFileKey splits a table file key into its table, tenant, job and
// file digest. It accepts exactly the keys TableFileKey builds.
func ParseTableFileKey(key string) (table, tenant string, job, file Digest, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 5 || parts[0] != "tables" || !tableRe.MatchString(parts[1]) {
		return "", "", job, file, false
	}
	tenant, ok1 := strings.CutPrefix(parts[2], "tenant=")
	jobHex, ok2 := strings.CutPrefix(parts[3], "job=")
	if !ok1 || !ok2 || ValidTenant(tenant) != nil {
		return "", "", job, file, false
	}
	job, err := ParseDigest(jobHex)
	file, fok := ParseObjectKey(key)
	if err != nil || !fok || TableFileKey(parts[1], tenant, job, file) != key {
		return "", "", job, file, false
	}
	return parts[1], tenant, job, file, true
}

// ReportPrefix is the prefix of a job's reports.
func ReportPrefix(job Digest) string { return ReportArea + job.Hex() + "/" }

// ReportArea is the top-level folder of every job's reports.
const ReportArea = "reports/"

// ReportKey is the key of the report of one reconcile run, named by the digest
// of everything that run read (files, flags, prices).
func ReportKey(job Digest, run Digest) string { return ReportPrefix(job) + run.Hex() + ".json" }

// PartitionArea is the top-level folder of partition results.
const PartitionArea = "partitions/"

// PartitionPrefix is the prefix of every partition result of a job.
func PartitionPrefix(job Digest) string { return PartitionArea + job.Hex() + "/" }

// PartitionRunPrefix is the prefix of the partition results of one reconcile
// run: run is the digest that names that run's report (ReportKey), so the
// partitions of one run and the merged report share it.
func PartitionRunPrefix(job, run Digest) string { return PartitionPrefix(job) + run.Hex() + "/" }

// PartitionKey is the key of the result marker of partition p of a run.
func PartitionKey(job, run Digest, p Partition) string {
	if err := p.Valid(); err != nil {
		panic("lake: " + err.Error())
	}
	return fmt.Sprintf("%s%04d-of-%04d.json", PartitionRunPrefix(job, run), p.K, p.N)
}

// ParsePartitionKey splits a partition result key into its job, run and
// partition. It accepts exactly the keys PartitionKey builds.
func ParsePartitionKey(key string) (job, run Digest, p Partition, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 || parts[0]+"/" != PartitionArea {
		return job, run, p, false
	}
	var err error
	if job, err = ParseDigest(parts[1]); err != nil || job.Hex() != parts[1] {
		return job, run, p, false
	}
	if run, err = ParseDigest(parts[2]); err != nil || run.Hex() != parts[2] {
		return job, run, p, false
	}
	name, found := strings.CutSuffix(parts[3], ".json")
	ks, ns, cut := strings.Cut(name, "-of-")
	if !found || !cut || len(ks) != 4 || len(ns) != 4 || strings.Trim(ks+ns, "0123456789") != "" {
		return job, run, p, false
	}
	p.K, _ = strconv.Atoi(ks)
	p.N, _ = strconv.Atoi(ns)
	if p.Valid() != nil {
		return job, run, p, false
	}
	return job, run, p, true
}

// LedgerArea is the top-level folder of every job's ledger.
const LedgerArea = "ledger/"

// LedgerPrefix is the prefix of all ledger events of a job.
func LedgerPrefix(job Digest) string { return LedgerArea + job.Hex() + "/" }

// LedgerShardPrefix is the prefix of the events of one shard of a job.
func LedgerShardPrefix(job Digest, shard string) string {
	if err := ValidShardID(shard); err != nil {
		panic("lake: " + err.Error())
	}
	return LedgerPrefix(job) + shard + "/"
}

// LedgerKey is the key of event seq of a shard.
func LedgerKey(job Digest, shard string, seq int) string {
	return fmt.Sprintf("%s%010d.json", LedgerShardPrefix(job, shard), seq)
}

// ParseLedgerKey splits a ledger event key into its job, shard and sequence
// number. It accepts exactly the keys LedgerKey builds, so temporary files and
// stray names beside the events are rejected.
func ParseLedgerKey(key string) (job Digest, shard string, seq int, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 || parts[0] != "ledger" {
		return job, "", 0, false
	}
	job, err := ParseDigest(parts[1])
	if err != nil || job.Hex() != parts[1] || ValidShardID(parts[2]) != nil {
		return job, "", 0, false
	}
	num, found := strings.CutSuffix(parts[3], ".json")
	if !found || len(num) != 10 || strings.Trim(num, "0123456789") != "" {
		return job, "", 0, false
	}
	seq, err = strconv.Atoi(num)
	if err != nil || seq < 1 {
		return job, "", 0, false
	}
	return job, parts[2], seq, true
}

// BatchRecordKey is the key of the record of a provider batch made for a
// shard that the shard's events do not bind (a duplicate): one per batch id,
// named by the id's digest.
func BatchRecordKey(job Digest, shard, batchID string) string {
	return LedgerShardPrefix(job, shard) + "batches/" + Sum([]byte(batchID)).Hex() + ".json"
}

// ParseBatchRecordKey accepts exactly the keys BatchRecordKey builds.
func ParseBatchRecordKey(key string) (job Digest, shard string, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 5 || parts[0] != "ledger" || parts[3] != "batches" {
		return job, "", false
	}
	job, err := ParseDigest(parts[1])
	if err != nil || job.Hex() != parts[1] || ValidShardID(parts[2]) != nil {
		return job, "", false
	}
	name, found := strings.CutSuffix(parts[4], ".json")
	if d, err := ParseDigest(name); !found || err != nil || d.Hex() != name {
		return job, "", false
	}
	return job, parts[2], true
}

// ParseObjectKey returns the digest named by an object or table-file key.
func ParseObjectKey(key string) (Digest, bool) {
	base := key[strings.LastIndexByte(key, '/')+1:]
	base = strings.TrimSuffix(base, ".parquet")
	d, err := ParseDigest(base)
	return d, err == nil
}

// SimStatePrefix holds the built-in simulator's pretend server state: inside
// the lake so separate commands see the same simulated batches, outside its
// contract (not write-once, not verified).
const SimStatePrefix = "_sim/"

// StagingPrefix holds files a provider reads and writes in the lake's own
// bucket (Bedrock's input shards and output, by default): inside the bucket,
// outside the lake's contract (written by the provider, not verified).
const StagingPrefix = "_staging/"
