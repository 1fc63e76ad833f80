package lake

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// State is a job or shard state (docs/contract.md).
type State string

// The job and shard states (docs/contract.md).
const (
	Created     State = "CREATED"
	Validated   State = "VALIDATED"
	Submitting  State = "SUBMITTING"
	Submitted   State = "SUBMITTED"
	Running     State = "RUNNING"
	Reconciling State = "RECONCILING"
	Partial     State = "PARTIAL"
	Completed   State = "COMPLETED"
	Failed      State = "FAILED"
	Cancelled   State = "CANCELLED"
	Expired     State = "EXPIRED"
)

// transitions lists, for each state, the states an event may move it to.
// "" is the state of a shard without events.
var transitions = map[State][]State{
	"":          {Created},
	Created:     {Validated, Failed},
	Validated:   {Submitting, Reconciling, Cancelled},
	Submitting:  {Submitting, Submitted, Validated, Failed},
	Submitted:   {Submitted, Running, Failed, Expired, Cancelled, Reconciling},
	Running:     {Running, Failed, Expired, Cancelled, Reconciling},
	Reconciling: {Reconciling, Completed, Partial},
	Partial:     {Reconciling},
	Completed:   {Reconciling},
	Failed:      {Reconciling},
	Cancelled:   {Reconciling},
	Expired:     {Reconciling},
}

// CanTransition reports whether an event may move a shard from one state to another.
func CanTransition(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// leased states carry a lease: another actor may take over only once it expired.
func leased(s State) bool { return s == Submitting || s == Reconciling }

// Event is one ledger event.
type Event struct {
	JobKey        string            `json:"job_key"`
	ShardID       string            `json:"shard_id"`
	Seq           int               `json:"seq"`
	State         State             `json:"state"`
	At            time.Time         `json:"at"`
	Actor         string            `json:"actor"`
	ProviderJobID string            `json:"provider_job_id,omitempty"`
	LeaseExpires  *time.Time        `json:"lease_expires,omitempty"`
	Detail        map[string]string `json:"detail,omitempty"`
	// Nonce is random and new for every append, so that no two appends ever
	// write the same bytes: finding our own bytes under the key then proves the
	// event is ours (a retried request whose first response was lost), never
	// a twin's — two writers with the same actor at the same instant.
	Nonce string `json:"nonce,omitempty"`
}

// ErrConflict means another writer appended the same sequence number first.
var ErrConflict = errors.New("ledger: another writer won this transition")

// ErrLeased means another actor holds a live lease on the shard.
var ErrLeased = errors.New("ledger: shard is leased by another actor")

// ErrIllegalTransition means the state machine refuses the transition.
var ErrIllegalTransition = errors.New("ledger: illegal transition")

// Ledger appends and reads ledger events.
type Ledger struct {
	Lake  *Lake
	Actor string
	Now   func() time.Time
}

// NewLedger returns a ledger acting as actor (host:pid:random by default: the
// random part keeps two containers with the same host name and pid apart,
// since a lease holder is recognised by its actor).
func NewLedger(l *Lake, actor string) *Ledger {
	if actor == "" {
		h, _ := os.Hostname()
		actor = h + ":" + strconv.Itoa(os.Getpid()) + ":" + randomHex(4)
	}
	return &Ledger{Lake: l, Actor: actor, Now: func() time.Time { return time.Now().UTC() }}
}

// Events returns the events of a shard in sequence order, checking that the
// sequence has no gaps.
func (g *Ledger) Events(ctx context.Context, job Digest, shard string) ([]Event, error) {
	keys, err := g.eventKeys(ctx, job, shard)
	if err != nil {
		return nil, err
	}
	evs := make([]Event, 0, len(keys))
	for i, k := range keys {
		var e Event
		if err := g.Lake.GetJSON(ctx, k, FormatEvent, &e); err != nil {
			return nil, err
		}
		if e.Seq != i+1 || LedgerKey(job, shard, e.Seq) != k {
			return nil, fmt.Errorf("ledger %s/%s: event %s has seq %d, want %d (gap or misnamed event): %w", job.Hex(), shard, k, e.Seq, i+1, ErrCorrupt)
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// Last returns the last event of a shard, or a zero Event (State "") if none.
func (g *Ledger) Last(ctx context.Context, job Digest, shard string) (Event, error) {
	evs, err := g.Events(ctx, job, shard)
	if err != nil || len(evs) == 0 {
		return Event{}, err
	}
	return evs[len(evs)-1], nil
}

// Transition appends an event moving the shard to state `to`, after checking
// the state machine and any live lease held by another actor. A lease > 0 is
// recorded on the event; a lease < 0 records one that has already expired
// (a worker giving up its lease after an error). It returns the appended event.
func (g *Ledger) Transition(ctx context.Context, job Digest, shard string, to State, lease time.Duration, providerJobID string, detail map[string]string) (Event, error) {
	last, err := g.Last(ctx, job, shard)
	if err != nil {
		return Event{}, err
	}
	now := g.Now()
	if !CanTransition(last.State, to) {
		return Event{}, fmt.Errorf("ledger %s/%s: %s -> %s: %w", job.Hex()[:12], shard, orNone(last.State), to, ErrIllegalTransition)
	}
	if leased(last.State) && last.Actor != g.Actor && last.LeaseExpires != nil && now.Before(*last.LeaseExpires) {
		return Event{}, fmt.Errorf("ledger %s/%s: %s held by %s until %s: %w", job.Hex()[:12], shard, last.State, last.Actor, last.LeaseExpires.Format(time.RFC3339), ErrLeased)
	}
	if leased(last.State) && last.Actor != g.Actor && to != last.State {
		// Only the holder leaves a leased state; anyone else must take the
		// (expired) lease over first. A worker whose lease was taken over
		// while it was slow cannot complete the step behind the taker's back.
		return Event{}, fmt.Errorf("ledger %s/%s: %s is held by %s; take the lease over before moving to %s: %w", job.Hex()[:12], shard, last.State, last.Actor, to, ErrLeased)
	}
	e := Event{JobKey: job.Hex(), ShardID: shard, Seq: last.Seq + 1, State: to, At: now, Actor: g.Actor, ProviderJobID: providerJobID, Detail: detail, Nonce: randomHex(16)}
	if providerJobID == "" {
		e.ProviderJobID = last.ProviderJobID
	}
	if lease != 0 {
		// A negative lease releases: the event's lease has already expired.
		exp := now.Add(max(lease, 0))
		e.LeaseExpires = &exp
	}
	if err := g.append(ctx, job, shard, e); err != nil {
		return Event{}, err
	}
	return e, nil
}

// eventKeys lists the event keys of a shard in sequence order, leaving out
// anything else in the folder (a concurrent or crashed append's temp file).
// A local lake reads the folder directly: fileblob's listing stats every entry
// and fails when a concurrent append's temp file vanishes under it.
func (g *Ledger) eventKeys(ctx context.Context, job Digest, shard string) ([]string, error) {
	prefix := LedgerShardPrefix(job, shard)
	var names []string
	if _, ok := g.Lake.LocalDir(); ok {
		des, err := os.ReadDir(g.Lake.LocalPath(prefix))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("ledger list %s: %w", prefix, err)
		}
		for _, de := range des {
			names = append(names, prefix+de.Name())
		}
	} else {
		var err error
		if names, err = g.Lake.List(ctx, prefix); err != nil {
			return nil, err
		}
	}
	keys := names[:0]
	for _, k := range names {
		if _, _, _, ok := ParseLedgerKey(k); ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("lake: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}

func orNone(s State) State {
	if s == "" {
		return "(none)"
	}
	return s
}

// append creates the event's key atomically; ErrConflict if it exists.
func (g *Ledger) append(ctx context.Context, job Digest, shard string, e Event) error {
	key := LedgerKey(job, shard, e.Seq)
	data, err := SealJSON(FormatEvent, e)
	if err != nil {
		return err
	}
	if dir, ok := g.Lake.LocalDir(); ok {
		return linkCreate(filepath.Join(dir, filepath.FromSlash(key)), data)
	}
	created, err := g.Lake.PutOnce(ctx, key, data)
	if errors.Is(err, ErrCorrupt) || (err == nil && !created) {
		// Someone else's event is there, or ours from a retried request
		// whose first response was lost: the nonce makes identical bytes ours.
		if err == nil {
			return nil
		}
		return fmt.Errorf("ledger append %s: %w", key, ErrConflict)
	}
	return err
}

// linkCreate creates the event file at path with createOnce: exactly one
// concurrent writer wins, and the event is complete before it is visible.
func linkCreate(path string, data []byte) error {
	created, err := createOnce(path, bytes.NewReader(data), int64(len(data)), true)
	if err != nil {
		return fmt.Errorf("ledger append %s: %w", path, err)
	}
	if !created {
		if old, rerr := os.ReadFile(path); rerr == nil && bytes.Equal(old, data) {
			return nil
		}
		return fmt.Errorf("ledger append %s: %w", path, ErrConflict)
	}
	return nil
}

// JobState derives a job's state from its shards' states: the least advanced
// shard decides, failures and partials dominate completion.
func JobState(shards []State) State {
	if len(shards) == 0 {
		return ""
	}
	order := []State{"", Created, Validated, Submitting, Submitted, Running, Reconciling, Failed, Expired, Cancelled, Partial, Completed}
	rank := map[State]int{}
	for i, s := range order {
		rank[s] = i
	}
	min := shards[0]
	for _, s := range shards[1:] {
		if rank[s] < rank[min] {
			min = s
		}
	}
	return min
}
