package bedrockbatch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Bedrock's constraints on CreateModelInvocationJob (API reference):
// clientRequestToken 1–256 characters matching tokenPattern, jobName 1–63
// characters matching namePattern. Compiled on first use: their bounded
// repetitions make large programs, a few milliseconds of every command's
// start otherwise.
var (
	tokenPattern = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[a-zA-Z0-9]{1,256}(-*[a-zA-Z0-9]){0,256}$`)
	})
	namePattern = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9\+\-\.]){0,63}$`)
	})
)

const (
	maxTokenLen = 256
	maxNameLen  = 63
	// tokenPrefix versions the derivation: a change of it must never make
	// an old shard's token mean another shard.
	tokenPrefix = "bl1"
	namePrefix  = "batchlake-"
	// nameJobChars of the job key go into the name (96 bits): enough to
	// narrow a listing; the token, which holds the whole key, proves it.
	nameJobChars = 24
)

// Token is the clientRequestToken of the job for (jobKey, shardID):
// "bl1-<job key>-<shard id in hex>". It is a pure function of the shard's
// identity, so every create of that shard — a retry after a lost
// response, a second submitter, a resumed run — sends the same token and
// Bedrock makes one job. The job key already differs per attempt (a retry
// is a child job with its own key), so the attempt needs no place in it.
// Hex keeps any shard id (1–64 of [A-Za-z0-9._-]) inside the token's
// character set without two ids ever mapping to one token.
func Token(jobKey, shardID string) (string, error) {
	if !isHex64(jobKey) {
		return "", fmt.Errorf("bedrockbatch: job key %q: want 64 lower-case hex digits", jobKey)
	}
	if shardID == "" || len(shardID) > 64 {
		return "", fmt.Errorf("bedrockbatch: shard id %q: want 1–64 characters", shardID)
	}
	t := tokenPrefix + "-" + jobKey + "-" + hex.EncodeToString([]byte(shardID))
	if len(t) > maxTokenLen || !tokenPattern().MatchString(t) {
		return "", fmt.Errorf("bedrockbatch: token for shard %q is outside Bedrock's constraints", shardID)
	}
	return t, nil
}

// ParseToken returns the job key and shard id a Token was made from; ok is
// false for a token batchlake did not make.
func ParseToken(token string) (jobKey, shardID string, ok bool) {
	rest, found := strings.CutPrefix(token, tokenPrefix+"-")
	if !found || len(rest) < 66 || rest[64] != '-' {
		return "", "", false
	}
	jobKey = rest[:64]
	shard, err := hex.DecodeString(rest[65:])
	if !isHex64(jobKey) || err != nil || len(shard) == 0 || len(shard) > 64 || hex.EncodeToString(shard) != rest[65:] {
		return "", "", false
	}
	return jobKey, string(shard), true
}

// JobName is the jobName of the job for (jobKey, shardID):
// "batchlake-<first 24 hex of the job key>-<shard>", at most 63 characters.
// The shard part is the id itself where it fits the name's character set
// and length; otherwise characters outside the set become '-', the id is
// cut to fit, and 8 hex of its sha256 are appended, so that a_b and a-b
// get different names. The name narrows Find's listing; the token proves
// which job is whose.
func JobName(jobKey, shardID string) (string, error) {
	if !isHex64(jobKey) {
		return "", fmt.Errorf("bedrockbatch: job key %q: want 64 lower-case hex digits", jobKey)
	}
	if shardID == "" {
		return "", fmt.Errorf("bedrockbatch: empty shard id")
	}
	head := namePrefix + jobKey[:nameJobChars] + "-"
	room := maxNameLen - len(head)
	shard := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '+', r == '-':
			return r
		}
		return '-'
	}, shardID)
	if shard != shardID || len(shard) > room {
		sum := sha256.Sum256([]byte(shardID))
		shard = shard[:min(len(shard), room-9)] + "-" + hex.EncodeToString(sum[:4])
	}
	n := head + shard
	if !namePattern().MatchString(n) {
		return "", fmt.Errorf("bedrockbatch: job name for shard %q is outside Bedrock's constraints", shardID)
	}
	return n, nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
