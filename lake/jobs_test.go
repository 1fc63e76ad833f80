package lake

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestResolveJob(t *testing.T) {
	forEachBackend(t, func(t *testing.T, l *Lake) {
		ctx := context.Background()
		a := HashFields("job", "a")
		twin := a.Hex()[:12] + strings.Repeat("0", 52) // shares a's first 12 digits
		other := HashFields("job", "b")
		for _, k := range []string{a.Hex(), twin, other.Hex()} {
			if _, err := l.PutOnce(ctx, ManifestPrefix+k+".json", []byte("{}\n")); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			name, in string
			want     string // the resolved key, or "" for an error
			err      error
			cands    []string
		}{
			{"whole key", a.Hex(), a.Hex(), nil, nil},
			{"prefixed digest", a.String(), a.Hex(), nil, nil},
			{"unique prefix", other.Hex()[:8], other.Hex(), nil, nil},
			{"longer prefix tells the twins apart", a.Hex()[:13], a.Hex(), nil, nil},
			{"ambiguous prefix", a.Hex()[:12], "", nil, []string{min(a.Hex(), twin), max(a.Hex(), twin)}},
			{"unknown prefix", "ffffffff", "", ErrJobNotFound, nil},
			{"unknown whole key", strings.Repeat("e", 64), "", ErrJobNotFound, nil},
			{"too short", a.Hex()[:3], "", ErrBadJobKey, nil},
			{"not hex", "zzzzzzzz", "", ErrBadJobKey, nil},
			{"upper case", strings.ToUpper(a.Hex()[:8]), "", ErrBadJobKey, nil},
		} {
			t.Run(c.name, func(t *testing.T) {
				d, err := l.ResolveJob(ctx, c.in)
				var amb *AmbiguousJobError
				switch {
				case c.want != "":
					if err != nil || d.Hex() != c.want {
						t.Errorf("ResolveJob(%s) = %s, %v; want %s", c.in, d.Hex(), err, c.want)
					}
				case c.cands != nil:
					if !errors.As(err, &amb) || !slices.Equal(amb.Candidates, c.cands) {
						t.Errorf("ResolveJob(%s): %v; want ambiguity between %v", c.in, err, c.cands)
					}
				default:
					if !errors.Is(err, c.err) {
						t.Errorf("ResolveJob(%s): %v; want %v", c.in, err, c.err)
					}
				}
			})
		}
	})
}

func TestOpenExisting(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	if _, err := OpenExisting(ctx, missing); !errors.Is(err, ErrNoLake) {
		t.Errorf("missing folder: %v, want ErrNoLake", err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("OpenExisting created %s (stat: %v)", missing, err)
	}
	if _, err := OpenExisting(ctx, "file://"+missing); !errors.Is(err, ErrNoLake) {
		t.Errorf("missing file:// folder: %v, want ErrNoLake", err)
	}
	file := filepath.Join(dir, "afile")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenExisting(ctx, file); !errors.Is(err, ErrNoLake) || !strings.Contains(err.Error(), "it is a file") {
		t.Errorf("a file: %v, want ErrNoLake saying it is a file", err)
	}
	// Open, which plan and run use, creates a missing lake but not through a
	// file (exit 2, not an error worth running again).
	for _, u := range []string{file, filepath.Join(file, "sub")} {
		if _, err := Open(ctx, u); !errors.Is(err, ErrNoLake) || !strings.Contains(err.Error(), "a file is where its folder would be") {
			t.Errorf("Open(%s): %v, want ErrNoLake naming the file", u, err)
		}
	}
	empty := filepath.Join(dir, "empty")
	l := openLake(t, empty)
	if _, err := OpenExisting(ctx, empty); !errors.Is(err, ErrNoLake) {
		t.Errorf("lake without a manifest: %v, want ErrNoLake", err)
	}
	if _, err := l.PutOnce(ctx, ManifestKey(HashFields("j")), []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	got, err := OpenExisting(ctx, empty)
	if err != nil {
		t.Fatalf("lake with a manifest: %v", err)
	}
	got.Close()
}

func TestLedgerTip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, l *Lake) {
		ctx := context.Background()
		g := testLedger(l, "a", func() time.Time { return t0 })
		job := HashFields("job")
		if e, err := g.Tip(ctx, job, "s0"); err != nil || e.State != "" {
			t.Fatalf("Tip of a shard without events: %+v, %v; want none", e, err)
		}
		for _, to := range []State{Created, Validated, Submitting} {
			if _, err := g.Transition(ctx, job, "s0", to, 0, "", nil); err != nil {
				t.Fatal(err)
			}
			tip, err := g.Tip(ctx, job, "s0")
			if err != nil {
				t.Fatal(err)
			}
			last, err := g.Last(ctx, job, "s0")
			if err != nil {
				t.Fatal(err)
			}
			if tip.State != to || tip.Seq != last.Seq || tip.Nonce != last.Nonce {
				t.Errorf("after %s: Tip %s seq %d, Last %s seq %d", to, tip.State, tip.Seq, last.State, last.Seq)
			}
		}
		// A gap (event 2 lost) leaves 2 events whose last is numbered 3.
		if err := l.Bucket.Delete(ctx, LedgerKey(job, "s0", 2)); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Tip(ctx, job, "s0"); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Tip over a gap: %v, want ErrCorrupt", err)
		}
	})
}
