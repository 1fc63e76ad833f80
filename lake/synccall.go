package lake

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The synchronous tail (retry --mode sync) sends a shard's records one by one
// through the provider's real-time API. Each HTTP attempt of a record's call
// is preceded by a call record and, once the provider answered, followed by an
// answer record; the record's final result line is kept in a result record.
// All three are write-once objects beside the shard's ledger events:
//
//	ledger/<job>/<shard>/sync/<sha256(custom_id)>/<nnnnnn>.call.json
//	ledger/<job>/<shard>/sync/<sha256(custom_id)>/<nnnnnn>.answer.json
//	ledger/<job>/<shard>/sync/<sha256(custom_id)>/result.json
//
// A call without an answer may have reached the provider (a crash, a dropped
// connection): it is maybe_sent, and sending the record again is a counted
// duplicate submission, never a silent one.

// Formats of the synchronous tail's records.
const (
	FormatSyncCall   = "batchlake.sync-call/v1"
	FormatSyncAnswer = "batchlake.sync-answer/v1"
	FormatSyncResult = "batchlake.sync-result/v1"
)

// SyncCall is written before one HTTP attempt of a record's real-time call.
type SyncCall struct {
	JobKey   string    `json:"job_key"`
	ShardID  string    `json:"shard_id"`
	CustomID string    `json:"custom_id"`
	N        int       `json:"n"`
	At       time.Time `json:"at"`
	Actor    string    `json:"actor"`
}

// SyncAnswer records that call N got an HTTP answer (any status): the
// provider decided that attempt, so it is not maybe_sent.
type SyncAnswer struct {
	CustomID string    `json:"custom_id"`
	N        int       `json:"n"`
	Status   int       `json:"status"`
	At       time.Time `json:"at"`
}

// SyncResult is a record's final answer as a line of the provider's batch
// output format (a success or an API error answer).
type SyncResult struct {
	CustomID string    `json:"custom_id"`
	N        int       `json:"n"`
	Status   int       `json:"status"`
	Line     string    `json:"line"`
	At       time.Time `json:"at"`
}

// SyncRecordPrefix is the folder of one record's sync records.
func SyncRecordPrefix(job Digest, shard, customID string) string {
	return LedgerShardPrefix(job, shard) + "sync/" + Sum([]byte(customID)).Hex() + "/"
}

// SyncCallKey is the key of call n (1-based) of a record.
func SyncCallKey(job Digest, shard, customID string, n int) string {
	return fmt.Sprintf("%s%06d.call.json", SyncRecordPrefix(job, shard, customID), n)
}

// SyncAnswerKey is the key of the answer record of call n of a record.
func SyncAnswerKey(job Digest, shard, customID string, n int) string {
	return fmt.Sprintf("%s%06d.answer.json", SyncRecordPrefix(job, shard, customID), n)
}

// SyncResultKey is the key of a record's result.
func SyncResultKey(job Digest, shard, customID string) string {
	return SyncRecordPrefix(job, shard, customID) + "result.json"
}

// ParseSyncKey accepts exactly the keys SyncCallKey, SyncAnswerKey and
// SyncResultKey build.
func ParseSyncKey(key string) (job Digest, shard string, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 6 || parts[0] != "ledger" || parts[3] != "sync" {
		return job, "", false
	}
	job, err := ParseDigest(parts[1])
	if err != nil || job.Hex() != parts[1] || ValidShardID(parts[2]) != nil {
		return job, "", false
	}
	if d, err := ParseDigest(parts[4]); err != nil || d.Hex() != parts[4] {
		return job, "", false
	}
	if parts[5] == "result.json" {
		return job, parts[2], true
	}
	if _, _, ok := parseSyncName(parts[5]); !ok {
		return job, "", false
	}
	return job, parts[2], true
}

// parseSyncName splits "000001.call.json" into 1 and "call".
func parseSyncName(name string) (int, string, bool) {
	num, kind, found := strings.Cut(strings.TrimSuffix(name, ".json"), ".")
	if !found || !strings.HasSuffix(name, ".json") || len(num) != 6 || strings.Trim(num, "0123456789") != "" || (kind != "call" && kind != "answer") {
		return 0, "", false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 {
		return 0, "", false
	}
	return n, kind, true
}

// SyncState is what the lake knows of one record's real-time calls.
type SyncState struct {
	// Calls are the numbers of the calls made, ascending.
	Calls []int
	// Answered maps a call number to the HTTP status that answered it.
	Answered map[int]int
	// Result is the record's final answer, nil if none yet.
	Result *SyncResult
}

// Unanswered are the calls that may have been processed by the provider
// without their answer being kept (maybe_sent): a call with no answer record
// (a crash, a dropped connection), or one answered 2xx whose answer was lost
// before it was kept as the result. The call the result came from is not
// one; nor is a call answered with an error status (a 429, 5xx or 4xx
// answer: the provider did not process it).
func (s SyncState) Unanswered() []int {
	var out []int
	for _, n := range s.Calls {
		if st, ok := s.Answered[n]; ok && (st < 200 || st > 299) {
			continue
		}
		if s.Result != nil && s.Result.N == n {
			continue
		}
		out = append(out, n)
	}
	return out
}

// NextCall is the number of the record's next call.
func (s SyncState) NextCall() int {
	if len(s.Calls) == 0 {
		return 1
	}
	return s.Calls[len(s.Calls)-1] + 1
}

// ReadSyncState reads a record's sync records.
func (l *Lake) ReadSyncState(ctx context.Context, job Digest, shard, customID string) (SyncState, error) {
	st := SyncState{Answered: map[int]int{}}
	keys, err := l.List(ctx, SyncRecordPrefix(job, shard, customID))
	if err != nil {
		return st, err
	}
	for _, k := range keys {
		if _, _, ok := ParseSyncKey(k); !ok {
			continue // a concurrent write's temp file
		}
		name := k[strings.LastIndexByte(k, '/')+1:]
		if name == "result.json" {
			var r SyncResult
			if err := l.GetJSON(ctx, k, FormatSyncResult, &r); err != nil {
				return st, err
			}
			st.Result = &r
			continue
		}
		n, kind, _ := parseSyncName(name)
		switch kind {
		case "call":
			st.Calls = append(st.Calls, n)
		case "answer":
			var a SyncAnswer
			if err := l.GetJSON(ctx, k, FormatSyncAnswer, &a); err != nil {
				return st, err
			}
			st.Answered[n] = a.Status
		}
	}
	sort.Ints(st.Calls)
	return st, nil
}

// ErrSyncCallTaken means another writer made a record's call n first.
var ErrSyncCallTaken = errors.New("lake: another writer made this call of the record")

// PutSyncCall writes the record of call c.N before the call goes out.
func (l *Lake) PutSyncCall(ctx context.Context, job Digest, c SyncCall) error {
	key := SyncCallKey(job, c.ShardID, c.CustomID, c.N)
	created, err := l.PutJSON(ctx, key, FormatSyncCall, c)
	if errors.Is(err, ErrCorrupt) || (err == nil && !created) {
		if err == nil {
			return nil // our own bytes, from a retried write
		}
		return fmt.Errorf("sync call %s: %w", key, ErrSyncCallTaken)
	}
	return err
}

// PutSyncAnswer records that call a.N was answered.
func (l *Lake) PutSyncAnswer(ctx context.Context, job Digest, shard string, a SyncAnswer) error {
	_, err := l.PutJSON(ctx, SyncAnswerKey(job, shard, a.CustomID, a.N), FormatSyncAnswer, a)
	if errors.Is(err, ErrCorrupt) {
		return nil // an answer is already recorded for this call
	}
	return err
}

// PutSyncResult records a record's final answer. A result already there
// (another call's) is kept: the first result recorded is the record's.
func (l *Lake) PutSyncResult(ctx context.Context, job Digest, shard string, r SyncResult) error {
	_, err := l.PutJSON(ctx, SyncResultKey(job, shard, r.CustomID), FormatSyncResult, r)
	if errors.Is(err, ErrCorrupt) {
		return nil
	}
	return err
}
