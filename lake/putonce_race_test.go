package lake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestPutOnceRace: two writers put one key at the same moment, 300 times
// (30000 with BATCHLAKE_LONG=1). Exactly one is told it created the key and
// the key holds its bytes; the other is told the key holds other bytes
// (ErrCorrupt), or, when both wrote the same bytes, that it was already
// there. On a local lake fileblob's IfNotExist (stat, then rename) told both
// writers "created", the last one winning.
func TestPutOnceRace(t *testing.T) {
	rounds := 300
	switch {
	case longRaces():
		rounds = 30000
	case testing.Short():
		rounds = 60 // -short: a long race by nature; the full run repeats it 300 times
	}
	ctx := context.Background()
	l, err := Open(ctx, filepath.Join(t.TempDir(), "lake"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, same := range []bool{false, true} {
		t.Run(fmt.Sprintf("same-bytes=%v", same), func(t *testing.T) {
			bad := 0
			for i := range rounds {
				key := fmt.Sprintf("markers/race-%v/%05d.json", same, i)
				data := [2][]byte{[]byte(`{"writer":0}`), []byte(`{"writer":1}`)}
				if same {
					data[1] = data[0]
				}
				var (
					wg      sync.WaitGroup
					start   = make(chan struct{})
					created [2]bool
					errs    [2]error
				)
				for w := range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						created[w], errs[w] = l.PutOnce(ctx, key, data[w])
					}()
				}
				close(start)
				wg.Wait()
				winners := 0
				winner := -1
				for w := range 2 {
					switch {
					case errs[w] == nil && created[w]:
						winners++
						winner = w
					case errs[w] == nil && same:
					case errors.Is(errs[w], ErrCorrupt) && !same:
					default:
						t.Fatalf("round %d writer %d: created=%v err=%v", i, w, created[w], errs[w])
					}
				}
				got, err := os.ReadFile(l.LocalPath(key))
				if err != nil {
					t.Fatal(err)
				}
				if winners != 1 || !bytes.Equal(got, data[winner]) {
					bad++
					if bad <= 3 {
						t.Errorf("round %d: %d writers told they created %s, which holds %s", i, winners, key, got)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d rounds without exactly one winner holding its bytes", bad, rounds)
			}
			recordRace(t, fmt.Sprintf("two writers PutOnce one key of a local lake (same bytes: %v)", same), rounds, rounds-bad)
			ents, _ := os.ReadDir(filepath.Join(l.LocalPath("markers"), fmt.Sprintf("race-%v", same)))
			if len(ents) != rounds {
				t.Errorf("%d files after %d rounds: temp files left behind", len(ents), rounds)
			}
		})
	}
}

// recordRace appends one fault class's figures to $BATCHLAKE_RELIABILITY_OUT
// in the JSON line format cmd/blreliability sums into docs/reliability.md.
func recordRace(t *testing.T, class string, injected, survived int) {
	t.Helper()
	p := os.Getenv("BATCHLAKE_RELIABILITY_OUT")
	if p == "" {
		return
	}
	if t.Failed() {
		survived = 0
	}
	b, _ := json.Marshal(map[string]any{"suite": "write-once races", "class": class, "injected": injected, "survived": survived, "records_lost": 0})
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("tally: %v", err)
		return
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		t.Errorf("tally: %v", err)
	}
}
