package lake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// The conformance suite: every test here runs against mem://, a local folder
// and an S3 server over HTTP, and must behave the same on each.

func TestConformancePutOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, l *Lake) {
		ctx := context.Background()
		key := "objects/test/once"
		tests := []struct {
			name        string
			data        []byte
			wantCreated bool
			wantErr     error
		}{
			{"first write creates", []byte("alpha"), true, nil},
			{"same bytes again is success, not created", []byte("alpha"), false, nil},
			{"other bytes are corruption", []byte("alphA"), false, ErrCorrupt},
			{"a prefix of the bytes is corruption", []byte("alph"), false, ErrCorrupt},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				created, err := l.PutOnce(ctx, key, tc.data)
				if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
					t.Fatalf("PutOnce err = %v, want %v", err, tc.wantErr)
				}
				if created != tc.wantCreated {
					t.Errorf("created = %v, want %v", created, tc.wantCreated)
				}
				if err != nil && !strings.Contains(err.Error(), key) {
					t.Errorf("error %q does not name the key", err)
				}
			})
		}
		got, err := l.Bucket.ReadAll(ctx, key)
		if err != nil || string(got) != "alpha" {
			t.Errorf("stored bytes = %q, %v; want the first write kept", got, err)
		}
	})
}

// TestConformanceConditionalCreate checks the storage itself, below PutOnce:
// a second create of the same key with IfNotExist must fail with
// FailedPrecondition. On S3 this proves the server honours If-None-Match.
func TestConformanceConditionalCreate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, l *Lake) {
		ctx := context.Background()
		put := func(data string) error {
			w, err := l.Bucket.NewWriter(ctx, "raw/once", &blob.WriterOptions{IfNotExist: true})
			if err != nil {
				return err
			}
			if _, err := io.WriteString(w, data); err != nil {
				w.Close()
				return err
			}
			return w.Close()
		}
		if err := put("first"); err != nil {
			t.Fatalf("first conditional create: %v", err)
		}
		err := put("second")
		if gcerrors.Code(err) != gcerrors.FailedPrecondition {
			t.Fatalf("second conditional create: err = %v (code %v), want FailedPrecondition", err, gcerrors.Code(err))
		}
		got, err := l.Bucket.ReadAll(ctx, "raw/once")
		if err != nil || string(got) != "first" {
			t.Errorf("stored = %q, %v; want %q", got, err, "first")
		}
	})
}

func TestConformanceVerifiedReads(t *testing.T) {
	forEachBackend(t, func(t *testing.T, l *Lake) {
		ctx := context.Background()
		data := bytes.Repeat([]byte("batchlake verified read "), 4096) // ~96 KiB, several reads
		d, err := l.PutObject(ctx, data)
		if err != nil {
			t.Fatal(err)
		}
		key := ObjectKey(d)
		readers := map[string]func() ([]byte, error){
			"GetObject":   func() ([]byte, error) { return l.GetObject(ctx, d) },
			"GetVerified": func() ([]byte, error) { return l.GetVerified(ctx, key, d) },
			"OpenVerified": func() ([]byte, error) {
				r, err := l.OpenVerified(ctx, key, d)
				if err != nil {
					return nil, err
				}
				defer r.Close()
				return io.ReadAll(r)
			},
		}
		for name, read := range readers {
			t.Run(name+"/intact", func(t *testing.T) {
				got, err := read()
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("read intact object: %d bytes, %v", len(got), err)
				}
			})
		}
		flipByte(t, l, key)
		for name, read := range readers {
			t.Run(name+"/flipped byte", func(t *testing.T) {
				_, err := read()
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("err = %v, want ErrCorrupt", err)
				}
				if !strings.Contains(err.Error(), key) {
					t.Errorf("error %q does not name key %s", err, key)
				}
			})
		}
		t.Run("missing", func(t *testing.T) {
			_, err := l.GetObject(ctx, Sum([]byte("never stored")))
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("err = %v, want ErrNotFound", err)
			}
		})
	})
}

func TestConformanceSealedJSON(t *testing.T) {
	type body struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	}
	tamper := []struct {
		name    string
		edit    func(b []byte) []byte
		wantErr error // nil: any error will do (format mismatch is not corruption)
	}{
		{"body value changed", func(b []byte) []byte { return bytes.Replace(b, []byte(`"count":7`), []byte(`"count":8`), 1) }, ErrCorrupt},
		{"body field renamed", func(b []byte) []byte { return bytes.Replace(b, []byte(`"name"`), []byte(`"nome"`), 1) }, ErrCorrupt},
		{"digest changed", func(b []byte) []byte {
			i := bytes.Index(b, []byte(`"sha256":"`)) + len(`"sha256":"`)
			b[i] ^= 0x01
			return b
		}, ErrCorrupt},
		{"not JSON any more", func(b []byte) []byte { return b[:len(b)/2] }, ErrCorrupt},
		{"other format", func(b []byte) []byte {
			return bytes.Replace(b, []byte(FormatManifest), []byte("batchlake.manifest/v9"), 1)
		}, nil},
	}
	forEachBackend(t, func(t *testing.T, l *Lake) {
		ctx := context.Background()
		for i, tc := range tamper {
			t.Run(tc.name, func(t *testing.T) {
				key := ManifestKey(Sum([]byte{byte(i)}))
				if _, err := l.PutJSON(ctx, key, FormatManifest, body{"x", 7}); err != nil {
					t.Fatal(err)
				}
				var ok body
				if err := l.GetJSON(ctx, key, FormatManifest, &ok); err != nil || ok != (body{"x", 7}) {
					t.Fatalf("intact marker: %+v, %v", ok, err)
				}
				raw, err := l.Bucket.ReadAll(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				edited := tc.edit(slices.Clone(raw))
				if bytes.Equal(edited, raw) {
					t.Fatal("tamper did not change the bytes")
				}
				overwrite(t, l, key, edited)
				var got body
				err = l.GetJSON(ctx, key, FormatManifest, &got)
				if err == nil {
					t.Fatalf("tampered marker read back as %+v without error", got)
				}
				if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Errorf("err = %v, want %v", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), key) {
					t.Errorf("error %q does not name key %s", err, key)
				}
			})
		}
	})
}

func TestConformanceList(t *testing.T) {
	forEachBackend(t, func(t *testing.T, l *Lake) {
		ctx := context.Background()
		keys := []string{"a/x/2", "a/x/1", "a/y", "a/x/10", "b/x/1", "ax"}
		for _, k := range keys {
			if _, err := l.PutOnce(ctx, k, []byte(k)); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			prefix string
			want   []string
		}{
			{"a/x/", []string{"a/x/1", "a/x/10", "a/x/2"}},
			{"a/", []string{"a/x/1", "a/x/10", "a/x/2", "a/y"}},
			{"a", []string{"a/x/1", "a/x/10", "a/x/2", "a/y", "ax"}},
			{"", []string{"a/x/1", "a/x/10", "a/x/2", "a/y", "ax", "b/x/1"}},
			{"c/", nil},
		}
		for _, tc := range tests {
			t.Run("prefix="+tc.prefix, func(t *testing.T) {
				got, err := l.List(ctx, tc.prefix)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("List(%q) = %q, want %q", tc.prefix, got, tc.want)
				}
			})
		}
	})
}

func TestConformanceTableDeterministic(t *testing.T) {
	rows := func(n int, salt string) []AttemptRow {
		out := make([]AttemptRow, n)
		for i := range out {
			code := int32(200)
			out[i] = AttemptRow{JobKey: "j", Tenant: "acme", Provider: "openai", CustomID: salt + string(rune('a'+i%26)),
				Channel: "output", LineNo: int64(i + 1), StatusCode: &code, Outcome: "success", InputTokens: int64(i)}
		}
		return out
	}
	job := Sum([]byte("job"))
	forEachBackend(t, func(t *testing.T, l *Lake) {
		ctx := context.Background()
		other := openMem(t)
		tmp := t.TempDir()
		k1, err := WriteTable(ctx, l, tmp, "attempts", "acme", job, rows(1000, "r"))
		if err != nil {
			t.Fatal(err)
		}
		k2, err := WriteTable(ctx, l, tmp, "attempts", "acme", job, rows(1000, "r"))
		if err != nil {
			t.Fatalf("second write of identical rows: %v", err)
		}
		k3, err := WriteTable(ctx, other, tmp, "attempts", "acme", job, rows(1000, "r"))
		if err != nil {
			t.Fatal(err)
		}
		k4, err := WriteTable(ctx, l, tmp, "attempts", "acme", job, rows(1000, "s"))
		if err != nil {
			t.Fatal(err)
		}
		if k1 != k2 || k1 != k3 {
			t.Errorf("identical rows gave different files: %s, %s, %s", k1, k2, k3)
		}
		if k4 == k1 {
			t.Errorf("different rows gave the same file %s", k4)
		}
		d, ok := ParseObjectKey(k1)
		if !ok || TableFileKey("attempts", "acme", job, d) != k1 {
			t.Fatalf("table key %s is not named by its digest", k1)
		}
		b1, err := l.GetVerified(ctx, k1, d)
		if err != nil {
			t.Fatal(err)
		}
		b3, err := other.GetVerified(ctx, k3, d)
		if err != nil || !bytes.Equal(b1, b3) {
			t.Errorf("bytes differ between lakes (%v)", err)
		}
		if !bytes.HasPrefix(b1, []byte("PAR1")) || !bytes.HasSuffix(b1, []byte("PAR1")) {
			t.Errorf("table file is not Parquet")
		}
		empty, err := WriteTable[AttemptRow](ctx, l, tmp, "attempts", "acme", job, nil)
		if err != nil || empty != "" {
			t.Errorf("empty table: key %q, err %v; want nothing stored", empty, err)
		}
	})
}

func TestCanTransition(t *testing.T) {
	tests := []struct {
		from, to State
		want     bool
	}{
		{"", Created, true},
		{"", Validated, false},
		{Created, Validated, true},
		{Created, Created, false},
		{Validated, Submitting, true},
		{Validated, Submitted, false},
		{Submitting, Submitting, true},
		{Submitting, Submitted, true},
		{Submitting, Validated, true},
		{Submitted, Running, true},
		{Submitted, Completed, false},
		{Running, Reconciling, true},
		{Reconciling, Completed, true},
		{Reconciling, Partial, true},
		{Completed, Reconciling, true},
		{Completed, Submitting, false},
		{Partial, Completed, false},
		{Expired, Running, false},
	}
	for _, tc := range tests {
		t.Run(string(orNone(tc.from))+"->"+string(tc.to), func(t *testing.T) {
			if got := CanTransition(tc.from, tc.to); got != tc.want {
				t.Errorf("CanTransition(%q, %q) = %v, want %v", tc.from, tc.to, got, tc.want)
			}
		})
	}
}

func TestConformanceLedger(t *testing.T) {
	type step struct {
		name    string
		actor   string
		advance time.Duration // clock moves before the step
		to      State
		lease   time.Duration
		wantErr error
	}
	steps := []step{
		{"create", "alice", 0, Created, 0, nil},
		{"skip validation", "alice", 0, Submitting, 0, ErrIllegalTransition},
		{"create twice", "alice", 0, Created, 0, ErrIllegalTransition},
		{"validate", "alice", 0, Validated, 0, nil},
		{"submitting with lease", "alice", 0, Submitting, 10 * time.Minute, nil},
		{"other actor before expiry", "bob", 5 * time.Minute, Submitting, 10 * time.Minute, ErrLeased},
		{"other actor binds before expiry", "bob", 0, Submitted, 0, ErrLeased},
		{"holder renews", "alice", 0, Submitting, 10 * time.Minute, nil},
		{"other actor after old expiry, before renewed", "bob", 6 * time.Minute, Submitting, 10 * time.Minute, ErrLeased},
		{"other actor after expiry", "bob", 10 * time.Minute, Submitting, 10 * time.Minute, nil},
		{"old holder refused now", "alice", 0, Submitted, 0, ErrLeased},
		{"new holder submits", "bob", 0, Submitted, 0, nil},
		{"submitted cannot complete", "bob", 0, Completed, 0, ErrIllegalTransition},
		{"running", "carol", 0, Running, 0, nil},
		{"reconciling with lease", "carol", 0, Reconciling, time.Hour, nil},
		{"other reconciler refused", "dave", time.Minute, Completed, 0, ErrLeased},
		{"holder completes", "carol", 0, Completed, 0, nil},
		{"completed is not leased", "dave", 0, Reconciling, 0, nil},
		{"cannot go back to running", "dave", 0, Running, 0, ErrIllegalTransition},
	}
	forEachBackend(t, func(t *testing.T, l *Lake) {
		ctx := context.Background()
		job := Sum([]byte("ledger conformance"))
		c := &clock{t: t0}
		ledgers := map[string]*Ledger{}
		var wantStates []State
		for _, s := range steps {
			t.Run(s.name, func(t *testing.T) {
				c.Advance(s.advance)
				g := ledgers[s.actor]
				if g == nil {
					g = testLedger(l, s.actor, c.Now)
					ledgers[s.actor] = g
				}
				e, err := g.Transition(ctx, job, "s0", s.to, s.lease, "", nil)
				if s.wantErr != nil {
					if !errors.Is(err, s.wantErr) {
						t.Fatalf("%s -> %s by %s: err = %v, want %v", s.actor, s.to, s.actor, err, s.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatalf("%s -> %s: %v", s.actor, s.to, err)
				}
				wantStates = append(wantStates, s.to)
				if e.Seq != len(wantStates) || e.State != s.to || e.Actor != s.actor || !e.At.Equal(c.Now()) {
					t.Errorf("event = %+v", e)
				}
				if (s.lease > 0) != (e.LeaseExpires != nil) || (s.lease > 0 && !e.LeaseExpires.Equal(c.Now().Add(s.lease))) {
					t.Errorf("lease = %v, want %v from now", e.LeaseExpires, s.lease)
				}
			})
		}
		evs, err := NewLedger(l, "reader").Events(ctx, job, "s0")
		if err != nil {
			t.Fatal(err)
		}
		var got []State
		for _, e := range evs {
			got = append(got, e.State)
		}
		if !slices.Equal(got, wantStates) {
			t.Errorf("ledger states = %v, want %v", got, wantStates)
		}
		// Events round-trip through the envelope.
		raw, err := l.Bucket.ReadAll(ctx, LedgerKey(job, "s0", 1))
		if err != nil {
			t.Fatal(err)
		}
		var env struct{ Format string }
		if err := json.Unmarshal(raw, &env); err != nil || env.Format != FormatEvent {
			t.Errorf("event envelope format = %q, %v", env.Format, err)
		}
	})
}
