package reconcile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchlake/batchlake/ingest"
	"github.com/batchlake/batchlake/lake"
)

// TestRetryShardsInOrder: the input shards are read for the retry several at
// a time; whichever read finishes first, the retry shards and lineage are
// the same bytes as when the shards are read one at a time, and hold the
// retry set in (input shard, line) order, split at the job's shard limit.
func TestRetryShardsInOrder(t *testing.T) {
	t.Parallel()
	g := generate(rand.New(rand.NewPCG(3, 17)), 400, 0, 0)
	dir := t.TempDir()
	var prefetched atomic.Int64
	prefetch := -1 // the lines read while the tables are written: none, unless a case says
	run := func(name string, budget int64, start func(string), whole bool) *Report {
		t.Helper()
		l, m, rep := reconcileNewWith(t, dir, name, g, 17, func(o *Options) {
			o.RetryReadBytes, o.retryReadStart, o.retryWholeShards = budget, start, whole
			o.retryPrefetchBytes, o.retryPrefetched, o.retryPrefetchFinish = prefetch, &prefetched, true
		})
		objs := objectsOf(t, l, rep)
		checkRetryOrder(t, g, m, rep, objs)
		return rep
	}
	// One shard at a time: the budget admits one read.
	want := run("serial", 1, func(string) {}, false)
	if n := prefetched.Load(); n != 0 {
		t.Fatalf("%d lines taken from a read ahead that was off", n)
	}
	if len(want.RetryShards) < 2 {
		t.Fatalf("%d retry shards: the test needs several", len(want.RetryShards))
	}
	// The first shards' reads finish last.
	slow := func(shard string) {
		if shard == "part-00000" || shard == "part-00001" {
			time.Sleep(100 * time.Millisecond)
		}
	}
	got := run("parallel", 64<<20, slow, false)
	if !slices.Equal(got.RetryShards, want.RetryShards) || got.RetryLineage != want.RetryLineage {
		t.Errorf("read in parallel: shards %v lineage %s; one at a time: %v, %s", got.RetryShards, got.RetryLineage, want.RetryShards, want.RetryLineage)
	}
	// Each input shard streamed whole (expected rows that do not say where
	// their lines start) instead of its retry lines read alone.
	got = run("whole", 64<<20, slow, true)
	if !slices.Equal(got.RetryShards, want.RetryShards) || got.RetryLineage != want.RetryLineage {
		t.Errorf("shards read whole: shards %v lineage %s; lines read alone: %v, %s", got.RetryShards, got.RetryLineage, want.RetryShards, want.RetryLineage)
	}
	// The lines read while the tables are written: all of them; or none,
	// where they would not all fit.
	for _, c := range []struct {
		name  string
		bytes int
		all   bool
	}{{"prefetch", 64 << 20, true}, {"prefetch-over", 2 << 10, false}} {
		prefetched.Store(0)
		prefetch = c.bytes
		got = run(c.name, 64<<20, slow, false)
		if !slices.Equal(got.RetryShards, want.RetryShards) || got.RetryLineage != want.RetryLineage {
			t.Errorf("%s: shards %v lineage %s; without: %v, %s", c.name, got.RetryShards, got.RetryLineage, want.RetryShards, want.RetryLineage)
		}
		n := prefetched.Load()
		switch {
		case c.all && n != int64(len(g.truth.retry)):
			t.Errorf("%s: %d of the %d retry lines taken from the read ahead", c.name, n, len(g.truth.retry))
		case !c.all && n != 0:
			t.Errorf("%s: %d of the %d retry lines taken from a read ahead they do not fit", c.name, n, len(g.truth.retry))
		}
	}
}

// checkRetryOrder checks the retry files hold exactly the truth's retry set,
// lineage and shard lines in (parent shard, line) order, each line the
// original request with its new custom id.
func checkRetryOrder(t *testing.T, g genBatch, m *lake.Manifest, rep *Report, objs map[string][]byte) {
	t.Helper()
	inputs := map[string]string{} // custom id -> input line
	for _, in := range g.input {
		var v struct {
			CustomID string `json:"custom_id"`
		}
		json.Unmarshal([]byte(in), &v)
		inputs[v.CustomID] = in
	}
	type lin struct {
		ingest.Lineage
		Parent string `json:"parent_custom_id"`
	}
	var lins []lin
	sc := bufio.NewScanner(bytes.NewReader(objs[rep.RetryLineage]))
	for sc.Scan() {
		var li lin
		if err := json.Unmarshal(sc.Bytes(), &li); err != nil {
			t.Fatal(err)
		}
		lins = append(lins, li)
	}
	var parents []string
	for _, li := range lins {
		parents = append(parents, li.Parent)
	}
	if want := slices.Sorted(slices.Values(g.truth.retry)); !slices.Equal(slices.Sorted(slices.Values(parents)), want) {
		t.Fatalf("lineage parents %v, want the retry set %v", parents, want)
	}
	// The generator's custom ids are in input order, so (shard, line) order
	// is custom id order.
	if !slices.IsSorted(parents) {
		t.Errorf("lineage not in input order: %v", parents)
	}
	i := 0
	for k, key := range rep.RetryShards {
		n := 0
		sc := bufio.NewScanner(bytes.NewReader(objs[key]))
		for sc.Scan() {
			if i >= len(lins) {
				t.Fatalf("retry shard %d has more lines than the lineage", k)
			}
			var v map[string]any
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				t.Fatal(err)
			}
			if v["custom_id"] != lins[i].CustomID {
				t.Errorf("retry line %d: custom id %v, lineage says %s", i, v["custom_id"], lins[i].CustomID)
			}
			var orig map[string]any
			json.Unmarshal([]byte(inputs[lins[i].Parent]), &orig)
			orig["custom_id"] = lins[i].CustomID
			a, _ := json.Marshal(orig)
			b, _ := json.Marshal(v)
			if !bytes.Equal(a, b) {
				t.Errorf("retry line %d: %s, want %s", i, b, a)
			}
			i, n = i+1, n+1
		}
		if n == 0 || n > m.ShardMaxRecords {
			t.Errorf("retry shard %d has %d lines (limit %d)", k, n, m.ShardMaxRecords)
		}
	}
	if i != len(lins) {
		t.Errorf("%d retry lines, %d lineage rows", i, len(lins))
	}
}

// TestRetryShardCorrupt: an input shard whose retry lines are not what plan
// stored fails the reconcile, naming the damage, while other shards are
// being read; nothing hangs and no report is written. Read whole, a shard
// fails on any byte that differs from its digest; its lines read alone, on
// a line that is not its record's request (its request digest, its
// custom_id, or no request at all), or that does not start or end where the
// expected row says.
func TestRetryShardCorrupt(t *testing.T) {
	for _, c := range []struct {
		name   string
		whole  bool
		damage func(b []byte) []byte // the shard's bytes, damaged
		want   string
	}{
		{"whole", true, func(b []byte) []byte { b[len(b)/2] ^= 1; return b }, "hashes to"},
		{"request", false, eachLine(func(l []byte) { l[bytes.LastIndex(l, []byte(`"content"`))+12] ^= 1 }), "request digest"},
		{"custom_id", false, eachLine(func(l []byte) { l[bytes.Index(l, []byte(`"custom_id"`))+15] ^= 1 }), "custom_id"},
		{"not json", false, eachLine(func(l []byte) { l[0] = '[' }), "not a request"},
		{"shifted", false, func(b []byte) []byte { return append([]byte(" "), b[:len(b)-1]...) }, "not a request"},
		{"truncated", false, func(b []byte) []byte { return b[:len(b)-1] }, "manifest says"},
	} {
		for _, prefetch := range []int{-1, 64 << 20} {
			t.Run(fmt.Sprintf("%s/prefetch=%d", c.name, prefetch), func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				l, dir := testLake(t)
				g := generate(rand.New(rand.NewPCG(3, 17)), 400, 0, 0)
				m := planAndIngest(t, l, dir, g, 17)
				s := m.Shards[len(m.Shards)/2]
				path := filepath.Join(dir, "lake", filepath.FromSlash(lake.ObjectKey(s.Object)))
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, c.damage(b), 0o644); err != nil {
					t.Fatal(err)
				}
				o := Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 2, CacheDir: filepath.Join(dir, "cache")}}
				o.retryWholeShards = c.whole
				// The damaged lines read before the tables are written, or after.
				o.retryPrefetchBytes, o.retryPrefetchFinish = prefetch, true
				_, err = Run(ctx, l, o)
				t.Log(err)
				if !errors.Is(err, lake.ErrCorrupt) || !strings.Contains(err.Error(), s.ShardID) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("err = %v, want lake.ErrCorrupt naming shard %s and %q", err, s.ShardID, c.want)
				}
				if ctx.Err() != nil {
					t.Fatal("reconcile hung")
				}
				job, _ := lake.ParseDigest(m.JobKey)
				if rep, err := LatestReport(ctx, l, job); err == nil && rep != nil {
					t.Errorf("a report was written: %+v", rep)
				}
			})
		}
	}
}

// eachLine applies damage to every line of a shard, in place.
func eachLine(damage func(line []byte)) func(b []byte) []byte {
	return func(b []byte) []byte {
		for rest := b; len(rest) > 0; {
			i := bytes.IndexByte(rest, '\n')
			damage(rest[:i])
			rest = rest[i+1:]
		}
		return b
	}
}

// TestRetryQueryFails: when the retry-set query fails part way (after some
// input shards were handed to readers and written), the reconcile fails with
// its error, no report is written, and nothing is stored that the whole run
// would not store: no lineage and no retry shard of a partial set.
func TestRetryQueryFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g := generate(rand.New(rand.NewPCG(3, 17)), 400, 0, 0)
	_, _, whole := reconcileNew(t, t.TempDir(), "whole", g, 17)
	if len(whole.RetryShards) < 2 {
		t.Fatalf("%d retry shards: the test needs several", len(whole.RetryShards))
	}
	wholeShards := map[string]bool{}
	for _, k := range whole.RetryShards {
		wholeShards[k] = true
	}

	l, dir := testLake(t)
	m := planAndIngest(t, l, dir, g, 17)
	objects := func() map[string]bool {
		keys, err := l.List(ctx, "objects/")
		if err != nil {
			t.Fatal(err)
		}
		set := map[string]bool{}
		for _, k := range keys {
			set[k] = true
		}
		return set
	}
	before := objects()
	boom := errors.New("retry set: connection to the engine lost")
	seen := 0
	o := Options{JobKey: m.JobKey, TmpDir: dir, Engine: EngineOptions{Threads: 2, CacheDir: filepath.Join(dir, "cache")}}
	o.retryQueryShard = func(string) error {
		if seen++; seen == 4 {
			return boom
		}
		return nil
	}
	_, err := Run(ctx, l, o)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the query's error", err)
	}
	if seen < 4 {
		t.Fatalf("the query reached %d shards, the test needs 4", seen)
	}
	job, _ := lake.ParseDigest(m.JobKey)
	if rep, err := LatestReport(ctx, l, job); err == nil && rep != nil {
		t.Errorf("a report was written: %+v", rep)
	}
	if whole.RetryLineage == "" || before[whole.RetryLineage] {
		t.Fatalf("the whole run's lineage %q is not a new object", whole.RetryLineage)
	}
	for k := range objects() {
		if !before[k] && !wholeShards[k] {
			t.Errorf("stored %s, not one of the whole run's retry shards (a partial lineage or shard)", k)
		}
	}
}
