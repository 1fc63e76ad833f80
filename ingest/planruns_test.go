package ingest

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/lake"
)

// planWith plans lines with at most runMax records per sort run and returns
// the result (or the error text) and every object the lake holds, with its
// bytes, but the ledger.
func planWith(t *testing.T, lines []string, runMax int, edit func(*PlanOptions)) (string, map[string]string) {
	t.Helper()
	res, _, objs := planLake(t, strings.Join(lines, "\n")+"\n", func(o *PlanOptions) {
		o.RunRecords = runMax
		if edit != nil {
			edit(o)
		}
	})
	return res, objs
}

// TestPlanExternalSortMatchesInMemory: records sorted through run files on
// disk (an external sort) give the same job, shards, expected rows, manifest
// and the same errors, in the same order, as records sorted in memory.
func TestPlanExternalSortMatchesInMemory(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var shuffled []string
	for i := range 50 {
		shuffled = append(shuffled, openaiLine(fmt.Sprintf("id-%03d", i), "gpt-4o-mini", fmt.Sprintf("text %d", rng.IntN(1000))))
	}
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	var keyed []string
	for i := range 30 {
		keyed = append(keyed, keyedLine(fmt.Sprintf("c%02d", 29-i), fmt.Sprintf("k%02d", i)))
	}
	dupIDs := slices.Clone(shuffled)
	dupIDs = append(dupIDs, shuffled[3], shuffled[10], shuffled[3])
	dupKeys := slices.Clone(keyed)
	dupKeys = append(dupKeys, keyedLine("c99", "k05"), keyedLine("c05", "k98"), keyedLine("c98", "k05"))
	manyDups := slices.Clone(shuffled)
	for range 60 {
		manyDups = append(manyDups, shuffled[rng.IntN(len(shuffled))])
	}
	// Two model configurations among the records: a run records a config
	// digest as the one before's where it is.
	mixedCfg := slices.Clone(shuffled)
	for i := range mixedCfg {
		if rng.IntN(3) == 0 {
			mixedCfg[i] = strings.Replace(mixedCfg[i], `"max_tokens": 100`, `"max_tokens": 200`, 1)
		}
	}
	useDoc := func(o *PlanOptions) { o.KeyField = "body.metadata.doc" }
	cases := []struct {
		name  string
		lines []string
		edit  func(*PlanOptions)
		fails bool
	}{
		{"shuffled ids", shuffled, nil, false},
		{"two model configs", mixedCfg, nil, false},
		{"key field", keyed, useDoc, false},
		{"duplicate ids", dupIDs, nil, true},
		{"duplicate ids and keys", dupKeys, useDoc, true},
		{"over 50 duplicates", manyDups, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, wantObjs := planWith(t, c.lines, math.MaxInt, c.edit)
			if strings.HasPrefix(want, "error: ") != c.fails {
				t.Fatalf("in memory: %s", want)
			}
			// The runs in files, in memory, and some of each.
			for _, mem := range []int64{-1, 0, 600} {
				for _, runMax := range []int{1, 4, 16} {
					got, gotObjs := planWith(t, c.lines, runMax, func(o *PlanOptions) {
						if c.edit != nil {
							c.edit(o)
						}
						o.runMemory = mem
					})
					if got != want {
						t.Errorf("runs of %d, %d bytes in memory:\n got %s\nwant %s", runMax, mem, got, want)
					}
					if len(gotObjs) != len(wantObjs) {
						t.Errorf("runs of %d, %d bytes in memory: %d objects, in memory %d", runMax, mem, len(gotObjs), len(wantObjs))
					}
					for k, v := range wantObjs {
						if gotObjs[k] != v {
							t.Errorf("runs of %d, %d bytes in memory: object %s differs or is missing", runMax, mem, k)
						}
					}
				}
			}
		})
	}
}

// TestPlanCarriesOutOfOrderLines: an input in key order has its shards
// written as it is read (the input is read once); otherwise the lines that
// arrive out of key order travel through the sort with their records, so
// writing the shards reads the input forward only. Either way the lake holds
// byte for byte what re-reading every line from the input gives, however the
// runs and the shards are cut.
func TestPlanCarriesOutOfOrderLines(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	var sorted []string
	for i := range 40 {
		sorted = append(sorted, openaiLine(fmt.Sprintf("id-%03d", i), "gpt-4o-mini", fmt.Sprintf("text %d %s", i, strings.Repeat("y", rng.IntN(40)))))
	}
	shuffled := slices.Clone(sorted)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	// Five records moved back from the end into the middle.
	mostly := slices.Concat(sorted[:10], sorted[35:], sorted[10:35])
	// The greatest key first: every later record is carried.
	outlier := slices.Concat(sorted[39:], sorted[:39])
	// Shards of at most 7 records (planWith) or at most 600 bytes; a
	// limit under the longest line fails the plan, the same way both ways.
	byBytes := func(o *PlanOptions) { o.ShardMaxBytes = 600 }
	// A retry job (records with lineage, as reconcile's retry step plans
	// them, in the parent's shard order: key order).
	retry := func(o *PlanOptions) {
		f, err := FormatFor(o.Provider)
		if err != nil {
			t.Fatal(err)
		}
		o.Lineage, o.ParentJobKey, o.Attempt = map[string]Lineage{}, "parent", 2
		for _, line := range sorted {
			rec, ierr := f.ParseInput([]byte(line), f.DefaultKeyField())
			if ierr != nil {
				t.Fatal(ierr)
			}
			key := "k-" + rec.BusinessKey
			rid := lake.HashFields(o.Tenant, key, o.SourceVersion, o.PromptVersion, rec.ConfigHash.Hex())
			o.Lineage[rec.CustomID] = Lineage{RecordID: rid.Hex(), BusinessKey: key, CustomID: rec.CustomID, Attempt: 2,
				ParentJobKey: "parent", ParentShardID: "part-00003", RetryReason: "missing"}
		}
	}
	tooSmall := func(o *PlanOptions) { o.ShardMaxBytes = 180 }
	cases := []struct {
		name       string
		lines      []string
		edit       func(*PlanOptions)
		speculated bool
		carried    int
		fails      bool
	}{
		{"in order", sorted, nil, true, 0, false},
		{"in order, byte limit", sorted, byBytes, true, 0, false},
		{"retry job in order", sorted, retry, true, 0, false},
		{"in order, a line over the limit", sorted, tooSmall, false, 0, true},
		{"in order, a bad line last", append(slices.Clone(sorted), `{"custom_id": "id-999"`), nil, false, 0, true},
		{"shuffled", shuffled, nil, false, -1, false}, // most carried, how many depends on the shuffle
		{"shuffled, byte limit", shuffled, byBytes, false, -1, false},
		{"five moved", mostly, nil, false, 25, false},
		{"greatest first", outlier, nil, false, 39, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, wantObjs := planWith(t, c.lines, math.MaxInt, func(o *PlanOptions) {
				if c.edit != nil {
					c.edit(o)
				}
				o.reread = true
			})
			if strings.HasPrefix(want, "error: ") != c.fails {
				t.Fatal(want)
			}
			for _, runMax := range []int{1, 4, math.MaxInt} {
				for _, runBytes := range []int{1, 200, 1 << 20} {
					speculated, carried, forward, backward := false, -1, -1, -1
					edit := func(o *PlanOptions) {
						if c.edit != nil {
							c.edit(o)
						}
						o.RunBytes = runBytes
						o.reads = func(s bool, c, f, b int) { speculated, carried, forward, backward = s, c, f, b }
					}
					got, gotObjs := planWith(t, c.lines, runMax, edit)
					at := fmt.Sprintf("runs of %d records, %d bytes", runMax, runBytes)
					if got != want {
						t.Errorf("%s:\n got %s\nwant %s", at, got, want)
					}
					if !maps.Equal(gotObjs, wantObjs) {
						t.Errorf("%s: the lake differs from re-reading every line", at)
					}
					if c.fails {
						continue
					}
					if speculated != c.speculated {
						t.Errorf("%s: shards written while reading: %v, want %v", at, speculated, c.speculated)
					}
					if speculated && forward+backward != 0 {
						t.Errorf("%s: shards written while reading, yet %d lines read again", at, forward+backward)
					}
					if backward != 0 {
						t.Errorf("%s: %d lines read backward from the input", at, backward)
					}
					if c.carried >= 0 && carried != c.carried || c.carried < 0 && carried < len(c.lines)/2 {
						t.Errorf("%s: %d lines carried, want %d", at, carried, c.carried)
					}
				}
			}
		})
	}
}

// TestPlanAgainLeavesNoShards: planning an input in key order again writes
// its shards while reading, finds the job planned and removes them.
func TestPlanAgainLeavesNoShards(t *testing.T) {
	var lines []string
	for i := range 30 {
		lines = append(lines, openaiLine(fmt.Sprintf("id-%03d", i), "gpt-4o-mini", "text"))
	}
	ctx := context.Background()
	l := newLake(t)
	o := opts(writeFile(t, "in.jsonl", lines, "\n"))
	o.TmpDir, o.ShardMaxRecords = t.TempDir(), 7
	for i, want := range []string{"planned 30 records in 5 shard(s)", "already planned: same records and settings, nothing new written"} {
		res, err := Plan(ctx, l, o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Message != want {
			t.Errorf("plan %d: %q, want %q", i+1, res.Message, want)
		}
		if left, _ := os.ReadDir(o.TmpDir); len(left) != 0 {
			t.Errorf("plan %d left %d temporary file(s), e.g. %s", i+1, len(left), left[0].Name())
		}
	}
}

// TestPlanRunsHoldTheirBound: while one run is written in the background the
// next fills, so each run takes half the records and carried bytes a plan
// may hold; the runs merge back into one sorted sequence with every record
// and carried line.
func TestPlanRunsHoldTheirBound(t *testing.T) {
	for _, c := range []struct {
		name            string
		n, max, maxByte int
		wantRuns        int
		memBudget       int64 // bytes of runs in memory
		wantFiles       int   // of the runs, those in files; -1: some, not all
	}{
		{"records bound, even", 40, 8, 1 << 20, 10, 0, 10},
		{"records bound, odd", 40, 7, 1 << 20, 10, 0, 10},
		{"one record a run", 5, 1, 1 << 20, 5, 0, 5},
		{"bytes bound", 30, 1000, 40, 15, 0, 15}, // each line is 10 bytes, each run 20 of the 40
		{"one run", 9, 100, 1 << 20, 0, 0, 0},    // never spilled: sorted in memory
		{"runs in memory", 40, 8, 1 << 20, 10, memRunBudget, 0},
		{"runs in memory, then files", 40, 8, 1 << 20, 10, 1000, -1}, // a run of 4 is about 350 bytes
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newPlanRuns(byKeyLine, c.max, c.maxByte, c.n, dir)
			s.memBudget = c.memBudget
			rng := rand.New(rand.NewPCG(1, 2))
			for _, i := range rng.Perm(c.n) {
				r := planRec{key: fmt.Sprintf("k%04d", i), line: int64(i + 1), n: 10}
				r.customID = r.key
				if err := s.add(r, []byte(fmt.Sprintf("line %04d", i)+"\n")); err != nil {
					t.Fatal(err)
				}
				held := len(s.buf)
				if s.spilling != nil {
					held += (c.max + 1) / 2 // at most a full run is being written
				}
				if held > max(c.max, 2) {
					t.Fatalf("%d records held, bound %d", held, c.max)
				}
			}
			if err := s.sort(); err != nil {
				t.Fatal(err)
			}
			defer s.close()
			files := 0
			for _, r := range s.runs {
				if r.mem == nil {
					files++
				}
			}
			some := c.wantFiles < 0 && files > 0 && files < len(s.runs)
			if len(s.runs) != c.wantRuns || files != c.wantFiles && !some {
				t.Errorf("%d runs, %d of them files, want %d and %d", len(s.runs), files, c.wantRuns, c.wantFiles)
			}
			i := 0
			err := s.eachLine(func(r *planRec) error {
				want := fmt.Sprintf("k%04d", i)
				if r.key != want || int(r.line) != i+1 || (r.data != nil && string(r.data) != fmt.Sprintf("line %04d\n", i)) {
					t.Errorf("record %d: %s line %d %q", i, r.key, r.line, r.data)
				}
				i++
				return nil
			})
			if err != nil || i != c.n {
				t.Fatalf("merged %d of %d records: %v", i, c.n, err)
			}
			// A second pass (plan makes two) reads every run again.
			again := 0
			if err := s.each(func(r *planRec) error { again++; return nil }); err != nil || again != c.n {
				t.Fatalf("a second pass merged %d of %d records: %v", again, c.n, err)
			}
		})
	}
}
