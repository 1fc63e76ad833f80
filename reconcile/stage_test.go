package reconcile

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// TestStageChecksEveryFile: a local lake's files, hashed two at a time on each core,
// come back in the order asked, each reported once, and one whose bytes do
// not match the digest in its name fails the staging wherever it is in the
// list, naming its key.
func TestStageChecksEveryFile(t *testing.T) {
	for _, c := range []struct {
		name    string
		n       int
		tamper  int // the file whose bytes change; -1 for none
		repeats bool
	}{
		{"one file", 1, -1, false},
		{"many files", 9, -1, false},
		{"a key asked twice", 5, -1, true},
		{"the only file tampered", 1, 0, false},
		{"the first tampered", 9, 0, false},
		{"one in the middle tampered", 9, 4, false},
		{"the second of a pair tampered", 9, 5, false},
		{"the last tampered", 9, 8, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, _ := testLake(t)
			var keys []string
			for i := range c.n {
				body := []byte(fmt.Sprintf("table file %d\n", i))
				key := fmt.Sprintf("tables/expected/tenant=t/job=j/%x.parquet", sha256.Sum256(body))
				p := l.LocalPath(key)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if i == c.tamper {
					body[0] ^= 1
				}
				if err := os.WriteFile(p, body, 0o444); err != nil {
					t.Fatal(err)
				}
				keys = append(keys, key)
			}
			if c.repeats {
				keys = append(keys, keys[1], keys[3])
			}
			e, err := OpenEngine(l, EngineOptions{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			var staged []string
			e.stage.onStage = func(key string, size int64) { staged = append(staged, key) }
			paths, err := e.stageAll(context.Background(), keys)
			if c.tamper >= 0 {
				if !errors.Is(err, lake.ErrCorrupt) || !strings.Contains(err.Error(), keys[c.tamper]) {
					t.Fatalf("err = %v, want lake.ErrCorrupt naming %s", err, keys[c.tamper])
				}
				if _, ok := e.stage.checked[keys[c.tamper]]; ok {
					t.Errorf("the tampered file is marked checked")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(paths) != len(keys) {
				t.Fatalf("%d paths for %d keys", len(paths), len(keys))
			}
			for i, k := range keys {
				if paths[i] != l.LocalPath(k) {
					t.Errorf("path %d = %s, want %s", i, paths[i], l.LocalPath(k))
				}
			}
			if want := keys[:c.n]; fmt.Sprint(staged) != fmt.Sprint(want) {
				t.Errorf("reported %v, want each file once in order %v", staged, want)
			}
			// Checked once per session: a second staging hashes nothing.
			staged = nil
			if _, err := e.stageAll(context.Background(), keys); err != nil || len(staged) != 0 {
				t.Errorf("again: err %v, reported %v", err, staged)
			}
		})
	}
}
