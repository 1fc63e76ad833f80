package lake

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"golang.org/x/sync/errgroup"
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
	JobKey        string     `json:"job_key"`
	ShardID       string     `json:"shard_id"`
	Seq           int        `json:"seq"`
	State         State      `json:"state"`
	At            time.Time  `json:"at"`
	Actor         string     `json:"actor"`
	ProviderJobID string     `json:"provider_job_id,omitempty"`
	LeaseExpires  *time.Time `json:"lease_expires,omitempty"`
	// Released marks a lease its holder gave up on purpose (after a definite
	// failure, or with a settle time after an unknown create outcome): the
	// holder makes no provider call after it, so another actor may take over
	// at LeaseExpires itself, without the takeover margin.
	Released bool              `json:"released,omitempty"`
	Detail   map[string]string `json:"detail,omitempty"`
	// Nonce is random and new for every append, so that no two appends ever
	// write the same bytes: finding our own bytes under the key then proves the
	// event is ours (a retried request whose first response was lost), never
	// a twin's — two writers with the same actor at the same instant.
	Nonce string `json:"nonce,omitempty"`
}

// Detail keys of a batch's aggregate usage as the provider reports it, kept
// on its shard's status events so that reconcile can cross-check the
// provider's totals against the lines.
const (
	DetailUsageInput  = "usage_input_tokens"
	DetailUsageCached = "usage_cached_input_tokens"
	DetailUsageOutput = "usage_output_tokens"
)

// DetailProviderStatus is the detail key of the provider's own status word
// for a shard's batch (validating, in_progress, completed, …; Bedrock's
// Completed, Stopped, …), as the submitter last saw it.
const DetailProviderStatus = "provider_status"

// ProviderStatusTerminal reports whether a provider status word (the value
// under DetailProviderStatus) means the provider will not change the batch
// any more. It knows every adapter's words: OpenAI's, which the Anthropic and
// Gemini adapters map theirs to, and Amazon Bedrock's, which bedrockbatch
// keeps as they are (a partially completed, stopped or expired job still
// holds paid results).
func ProviderStatusTerminal(status string) bool {
	return slices.Contains(ProviderTerminalStatuses, status)
}

// ProviderTerminalStatuses are the status words ProviderStatusTerminal
// accepts (a live catalog's batches view lists them in SQL).
var ProviderTerminalStatuses = []string{
	"completed", "failed", "expired", "cancelled",
	"Completed", "PartiallyCompleted", "Failed", "Stopped", "Expired",
}

// ErrConflict means another writer appended the same sequence number first.
var ErrConflict = errors.New("ledger: another writer won this transition")

// ErrLeased means another actor holds a live lease on the shard.
var ErrLeased = errors.New("ledger: shard is leased by another actor")

// ErrIllegalTransition means the state machine refuses the transition.
var ErrIllegalTransition = errors.New("ledger: illegal transition")

// ErrNotHolder means an append that only the lease holder may make was
// asked of another actor, or the holder's own event is no longer the last.
var ErrNotHolder = errors.New("ledger: not the holder of the shard's lease")

// DefaultTakeoverMargin is how long past a SUBMITTING lease's recorded expiry
// another actor waits before taking the shard over. The expiry is stamped by
// the holder's clock and compared on the taker's; the margin absorbs the skew
// between them and a provider call the holder aborted at its deadline that
// the provider still finished.
const DefaultTakeoverMargin = 30 * time.Second

// Ledger appends and reads ledger events.
type Ledger struct {
	Lake  *Lake
	Actor string
	Now   func() time.Time
	// TakeoverMargin is how long past an unreleased SUBMITTING lease's
	// expiry another actor waits to take over (NewLedger sets
	// DefaultTakeoverMargin; 0 means none).
	TakeoverMargin time.Duration
}

// NewLedger returns a ledger acting as actor (host:pid:random by default: the
// random part keeps two containers with the same host name and pid apart,
// since a lease holder is recognised by its actor).
func NewLedger(l *Lake, actor string) *Ledger {
	if actor == "" {
		h, _ := os.Hostname()
		actor = h + ":" + strconv.Itoa(os.Getpid()) + ":" + randomHex(4)
	}
	return &Ledger{Lake: l, Actor: actor, Now: func() time.Time { return time.Now().UTC() }, TakeoverMargin: DefaultTakeoverMargin}
}

// ledgerReads is how many events of one shard are read at a time. On a
// remote lake each read is a round trip (tens of milliseconds to S3), and a
// job's ledger is a few objects a shard: read one after another, a 20-shard
// reconcile spent seconds waiting on them.
const ledgerReads = 8

// shardEventReads is how many events of each shard EventsOf reads at a time,
// LedgerFanout shards at a time: at most 128 requests in flight.
const shardEventReads = 4

// Events returns the events of a shard in sequence order, checking that the
// sequence has no gaps. A remote lake's events are read ledgerReads at a time.
func (g *Ledger) Events(ctx context.Context, job Digest, shard string) ([]Event, error) {
	return g.events(ctx, job, shard, ledgerReads)
}

func (g *Ledger) events(ctx context.Context, job Digest, shard string, limit int) ([]Event, error) {
	keys, err := g.eventKeys(ctx, job, shard)
	if err != nil {
		return nil, err
	}
	return g.eventsAt(ctx, job, shard, keys, limit)
}

// ListedEvents is Events of a shard whose event keys, in sequence order, a
// listing has already found (MarkerKeys.EventKeys).
func (g *Ledger) ListedEvents(ctx context.Context, job Digest, shard string, keys []string) ([]Event, error) {
	return g.eventsAt(ctx, job, shard, keys, ledgerReads)
}

func (g *Ledger) eventsAt(ctx context.Context, job Digest, shard string, keys []string, limit int) ([]Event, error) {
	if err := g.checkNames(job, shard, keys); err != nil {
		return nil, err
	}
	// A local lake's reads do not wait: one after another, without goroutines.
	if _, local := g.Lake.LocalDir(); local {
		limit = 1
	}
	evs := make([]Event, len(keys))
	err := EachOf(ctx, len(keys), limit, func(ctx context.Context, i int) error {
		var err error
		evs[i], err = g.event(ctx, job, shard, keys[i], i+1)
		return err
	})
	if err != nil {
		return nil, err
	}
	return evs, nil
}

// EventsOf returns the events of each of shards (Events), read LedgerFanout
// shards at a time.
func (g *Ledger) EventsOf(ctx context.Context, job Digest, shards []string) ([][]Event, error) {
	out := make([][]Event, len(shards))
	err := EachOf(ctx, len(shards), LedgerFanout, func(ctx context.Context, i int) error {
		var err error
		out[i], err = g.events(ctx, job, shards[i], shardEventReads)
		return err
	})
	return out, err
}

// Last returns the last event of a shard, or a zero Event (State "") if none.
// It reads the shard's event names and only the last event: the names are
// its sequence (a gap among them is ErrCorrupt), so no earlier event is
// needed to know which one is last.
func (g *Ledger) Last(ctx context.Context, job Digest, shard string) (Event, error) {
	keys, err := g.eventKeys(ctx, job, shard)
	if err != nil || len(keys) == 0 {
		return Event{}, err
	}
	if err := g.checkNames(job, shard, keys); err != nil {
		return Event{}, err
	}
	return g.event(ctx, job, shard, keys[len(keys)-1], len(keys))
}

// checkNames checks that a shard's sorted event keys are its events 1..n,
// with no gap.
func (g *Ledger) checkNames(job Digest, shard string, keys []string) error {
	for i, k := range keys {
		if LedgerKey(job, shard, i+1) != k {
			return fmt.Errorf("ledger %s/%s: event %s where seq %d belongs (gap or misnamed event): %w", job.Hex(), shard, k, i+1, ErrCorrupt)
		}
	}
	return nil
}

// event reads the event at key, which must hold sequence number seq.
func (g *Ledger) event(ctx context.Context, job Digest, shard, key string, seq int) (Event, error) {
	var e Event
	if err := g.Lake.GetJSON(ctx, key, FormatEvent, &e); err != nil {
		return Event{}, err
	}
	if e.Seq != seq {
		return Event{}, fmt.Errorf("ledger %s/%s: event %s has seq %d, want %d (gap or misnamed event): %w", job.Hex(), shard, key, e.Seq, seq, ErrCorrupt)
	}
	return e, nil
}

// ShardFanout is how many shards a step works on at a time where each is a
// call to the provider (a batch polled, cancelled, counted in flight) as well
// as a few round trips to a remote lake: the provider's rate limits bound it.
const ShardFanout = 16

// LedgerFanout is how many shards' ledgers a step reads or appends to at a
// time where nothing else is called: each is a few round trips to a remote
// lake, and an object store answers many at once (a 20-shard job's in one
// round, not two).
const LedgerFanout = 32

// EachOf calls fn(ctx, i) for every i in [0, n), up to limit calls at a
// time, and returns the first error (the others' ctx is then cancelled).
// It is for independent round trips to the lake, such as one per shard.
// With one call at a time (n or limit 1) the calls run in order on the
// caller's goroutine.
func EachOf(ctx context.Context, n, limit int, fn func(ctx context.Context, i int) error) error {
	if n == 1 || limit <= 1 {
		for i := range n {
			if err := fn(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(limit)
	for i := range n {
		eg.Go(func() error { return fn(ectx, i) })
	}
	return eg.Wait()
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
	return g.TransitionFrom(ctx, job, shard, last, to, lease, providerJobID, detail)
}

// TransitionFrom is Transition from last, the shard's last event as the
// caller has just read it (Last; the zero Event for a shard with none),
// which saves reading it again. The append is conditional on its sequence
// number, so if another event came after last it fails with ErrConflict.
func (g *Ledger) TransitionFrom(ctx context.Context, job Digest, shard string, last Event, to State, lease time.Duration, providerJobID string, detail map[string]string) (Event, error) {
	now := g.Now()
	if !CanTransition(last.State, to) {
		return Event{}, fmt.Errorf("ledger %s/%s: %s -> %s: %w", job.Hex()[:12], shard, orNone(last.State), to, ErrIllegalTransition)
	}
	if leased(last.State) && last.Actor != g.Actor && last.LeaseExpires != nil && now.Before(g.takeoverAt(last)) {
		if last.Released {
			return Event{}, fmt.Errorf("ledger %s/%s: released by %s after an unknown outcome; settling until %s (the provider's listing delay), then any actor looks it up: %w", job.Hex()[:12], shard, last.Actor, last.LeaseExpires.Format(time.RFC3339Nano), ErrLeased)
		}
		return Event{}, fmt.Errorf("ledger %s/%s: %s held by %s until %s (lease expiry %s plus the takeover margin): %w", job.Hex()[:12], shard, last.State, last.Actor, g.takeoverAt(last).Format(time.RFC3339Nano), last.LeaseExpires.Format(time.RFC3339Nano), ErrLeased)
	}
	if leased(last.State) && last.Actor != g.Actor && to != last.State {
		// Only the holder leaves a leased state; anyone else must take the
		// (expired) lease over first. A worker whose lease was taken over
		// while it was slow cannot complete the step behind the taker's back.
		return Event{}, fmt.Errorf("ledger %s/%s: %s is held by %s; take the lease over before moving to %s: %w", job.Hex()[:12], shard, last.State, last.Actor, to, ErrLeased)
	}
	if to == Submitted && (last.State != Submitting || last.Actor != g.Actor) {
		// A shard is bound once, by the submitter holding it: a SUBMITTED
		// after another actor's SUBMITTED (or after SUBMITTED at all) would
		// bind a second batch.
		return Event{}, fmt.Errorf("ledger %s/%s: %s by %s -> SUBMITTED by %s: only the SUBMITTING holder binds a batch: %w", job.Hex()[:12], shard, orNone(last.State), last.Actor, g.Actor, ErrNotHolder)
	}
	e := g.next(job, shard, last, to, lease, providerJobID, detail)
	if err := g.append(ctx, job, shard, e); err != nil {
		return Event{}, err
	}
	return e, nil
}

// takeoverAt is when another actor may take over a leased shard whose last
// event is e: its lease expiry, plus the takeover margin for an unreleased
// SUBMITTING lease (whose holder may have a provider call in flight).
func (g *Ledger) takeoverAt(e Event) time.Time {
	if e.LeaseExpires == nil {
		return time.Time{}
	}
	if e.State == Submitting && !e.Released {
		return e.LeaseExpires.Add(max(g.TakeoverMargin, 0))
	}
	return *e.LeaseExpires
}

// next builds the event that follows last.
func (g *Ledger) next(job Digest, shard string, last Event, to State, lease time.Duration, providerJobID string, detail map[string]string) Event {
	now := g.Now()
	e := Event{JobKey: job.Hex(), ShardID: shard, Seq: last.Seq + 1, State: to, At: now, Actor: g.Actor, ProviderJobID: providerJobID, Detail: detail, Nonce: randomHex(16)}
	if providerJobID == "" {
		e.ProviderJobID = last.ProviderJobID
	}
	if lease != 0 {
		// A negative lease releases: the event's lease has already expired.
		exp := now.Add(max(lease, 0))
		e.LeaseExpires = &exp
		e.Released = lease < 0
	}
	return e
}

// AppendAfter appends an event directly after prev, this ledger's own last
// event, as a conditional create of sequence prev.Seq+1: it fails with
// ErrConflict when anything was appended since, so a success proves the
// lease prev recorded was still ours at the moment of the append (no read can
// prove that). A renewal is AppendAfter(prev, SUBMITTING, lease, …); binding
// a batch is AppendAfter(prev, SUBMITTED, …).
func (g *Ledger) AppendAfter(ctx context.Context, prev Event, to State, lease time.Duration, providerJobID string, detail map[string]string) (Event, error) {
	job, err := ParseDigest(prev.JobKey)
	if err != nil {
		return Event{}, fmt.Errorf("ledger append after seq %d: %w", prev.Seq, err)
	}
	if prev.Actor != g.Actor {
		return Event{}, fmt.Errorf("ledger %s/%s: seq %d is %s's event, not %s's: %w", job.Hex()[:12], prev.ShardID, prev.Seq, prev.Actor, g.Actor, ErrNotHolder)
	}
	if !CanTransition(prev.State, to) {
		return Event{}, fmt.Errorf("ledger %s/%s: %s -> %s: %w", job.Hex()[:12], prev.ShardID, orNone(prev.State), to, ErrIllegalTransition)
	}
	if to == Submitted && prev.State != Submitting {
		return Event{}, fmt.Errorf("ledger %s/%s: %s -> SUBMITTED: only the SUBMITTING holder binds a batch: %w", job.Hex()[:12], prev.ShardID, prev.State, ErrNotHolder)
	}
	return g.appendAfter(ctx, job, prev, g.next(job, prev.ShardID, prev, to, lease, providerJobID, detail))
}

func (g *Ledger) appendAfter(ctx context.Context, job Digest, prev Event, e Event) (Event, error) {
	if err := g.append(ctx, job, prev.ShardID, e); err != nil {
		return Event{}, err
	}
	return e, nil
}

// Release appends, directly after prev (this ledger's own last event), a
// SUBMITTING event that gives the lease up: another actor may take over at
// now+settle (settle 0: at once), without the takeover margin.
func (g *Ledger) Release(ctx context.Context, prev Event, settle time.Duration, detail map[string]string) (Event, error) {
	job, err := ParseDigest(prev.JobKey)
	if err != nil {
		return Event{}, fmt.Errorf("ledger release after seq %d: %w", prev.Seq, err)
	}
	if prev.Actor != g.Actor || prev.State != Submitting {
		return Event{}, fmt.Errorf("ledger %s/%s: seq %d is %s by %s: only the SUBMITTING holder releases: %w", job.Hex()[:12], prev.ShardID, prev.Seq, prev.State, prev.Actor, ErrNotHolder)
	}
	e := g.next(job, prev.ShardID, prev, Submitting, max(settle, 0), "", detail)
	exp := e.At.Add(max(settle, 0))
	e.LeaseExpires, e.Released = &exp, true
	return g.appendAfter(ctx, job, prev, e)
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
	if err := g.Lake.conditionalWrites(ctx); err != nil {
		return fmt.Errorf("ledger append %s: %w", key, err)
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

// ErrNoConditionalWrites means the object store ignores conditional creates
// (IfNotExist, S3's If-None-Match: *): the ledger's appends and leases rely on
// them, so it refuses to run on such a store.
var ErrNoConditionalWrites = errors.New("lake: the object store does not honour conditional writes (IfNotExist / If-None-Match: *)")

// LedgerProbePrefix is where ProbeConditionalWrites writes (and deletes) its
// probe objects.
const LedgerProbePrefix = "ledger-probe/"

// ProbeConditionalWrites checks that the store refuses a conditional create
// of a key that exists: it creates a fresh probe key with IfNotExist twice and
// requires the second to fail as a precondition failure. Some S3-compatible
// stores accept If-None-Match and overwrite anyway; on them two submitters
// could both "win" the same ledger sequence number and pay twice.
func ProbeConditionalWrites(ctx context.Context, l *Lake) error {
	key := LedgerProbePrefix + randomHex(16)
	put := func(ctx context.Context, body string) error {
		w, err := l.Bucket.NewWriter(ctx, key, &blob.WriterOptions{IfNotExist: true, ContentType: "text/plain"})
		if err != nil {
			return err
		}
		if _, err := io.WriteString(w, body); err != nil {
			_ = w.Close()
			return err
		}
		return w.Close()
	}
	// The key is new, so a first create refused as existing is our own
	// earlier attempt whose answer was lost.
	_, err := retry(ctx, l, "put", key, func(ctx context.Context) (bool, error) {
		if err := put(ctx, "first"); err != nil && gcerrors.Code(err) != gcerrors.FailedPrecondition {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("probe conditional writes: %w", wrapOp("put", key, err))
	}
	defer func() { _ = l.Bucket.Delete(context.WithoutCancel(ctx), key) }()
	refused, err := retry(ctx, l, "put", key, func(ctx context.Context) (bool, error) {
		err := put(ctx, "second")
		if err == nil {
			return false, nil
		}
		if gcerrors.Code(err) == gcerrors.FailedPrecondition {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return fmt.Errorf("probe conditional writes: %w", wrapOp("put", key, err))
	}
	if !refused {
		return fmt.Errorf("a second conditional create of the probe key %s succeeded: %w; the ledger cannot run on it (two submitters could both win one sequence number and pay twice): use a store that honours If-None-Match: * (Amazon S3, or a local folder)", key, ErrNoConditionalWrites)
	}
	return nil
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

// FormatBatchRecord is the format of a batch record (BatchRecordKey).
const FormatBatchRecord = "batchlake.batch-record/v1"

// BatchRecord notes a provider batch made for a shard that its ledger events
// may not bind: a batch created by a submitter that lost the shard's lease
// before it could record it, or a further batch a lookup found (Find's
// Duplicates). Status compares the records with the bound batch: any other
// batch is a duplicate submission, cancelled, collected and costed as such.
type BatchRecord struct {
	JobKey        string `json:"job_key"`
	ShardID       string `json:"shard_id"`
	ProviderJobID string `json:"provider_job_id"`
	// Why is how the batch came to be recorded: created_after_lease_lost or
	// found_duplicate.
	Why   string    `json:"why"`
	At    time.Time `json:"at"`
	Actor string    `json:"actor"`
}

// RecordBatch writes a batch record, once per batch id: a record of the same
// batch already there (from another actor) is kept as it is.
func (g *Ledger) RecordBatch(ctx context.Context, job Digest, shard, batchID, why string) error {
	key := BatchRecordKey(job, shard, batchID)
	if ok, err := g.Lake.Exists(ctx, key); err != nil || ok {
		return err
	}
	r := BatchRecord{JobKey: job.Hex(), ShardID: shard, ProviderJobID: batchID, Why: why, At: g.Now(), Actor: g.Actor}
	if _, err := g.Lake.PutJSON(ctx, key, FormatBatchRecord, r); err != nil && !errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("ledger record batch %s of %s/%s: %w", batchID, job.Hex()[:12], shard, err)
	}
	return nil
}

// BatchRecords returns a shard's batch records, oldest first.
func (g *Ledger) BatchRecords(ctx context.Context, job Digest, shard string) ([]BatchRecord, error) {
	keys, err := g.Lake.List(ctx, LedgerShardPrefix(job, shard)+"batches/")
	if err != nil {
		return nil, err
	}
	var out []BatchRecord
	for _, k := range keys {
		if _, _, ok := ParseBatchRecordKey(k); !ok {
			continue
		}
		var r BatchRecord
		if err := g.Lake.GetJSON(ctx, k, FormatBatchRecord, &r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, nil
}
