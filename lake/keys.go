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
//	reports/<job>/<reconcile-key-hex>.json          reconcile report (commit marker of reconcile)
//	ledger/<job>/<shard>/<seq>.json                 ledger events, seq zero-padded to 10 digits

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
func IngestPrefix(job Digest) string { return "ingests/" + job.Hex() + "/" }

// IngestKey is the key of the ingest record of one raw file in one channel.
func IngestKey(job Digest, channel string, raw Digest) string {
	return IngestPrefix(job) + channel + "-" + raw.Hex() + ".json"
}

// ReportPrefix is the prefix of a job's reports.
func ReportPrefix(job Digest) string { return "reports/" + job.Hex() + "/" }

// ReportKey is the key of the report of one reconcile run, named by the digest
// of everything that run read (files, flags, prices).
func ReportKey(job Digest, run Digest) string { return ReportPrefix(job) + run.Hex() + ".json" }

// LedgerPrefix is the prefix of all ledger events of a job.
func LedgerPrefix(job Digest) string { return "ledger/" + job.Hex() + "/" }

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
