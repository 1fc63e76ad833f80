package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/batchlake/batchlake/errkind"
)

func bedrockLine(i int) string {
	return fmt.Sprintf(`{"recordId":"R%07d","modelInput":{"anthropic_version":"bedrock-2023-05-31","max_tokens":16,"messages":[{"role":"user","content":[{"type":"text","text":"question %07d"}]}]}}`, i, i)
}

func bedrockLines(n int, shuffle bool) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = bedrockLine(i)
	}
	if shuffle {
		r := rand.New(rand.NewPCG(1, 2))
		r.Shuffle(n, func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	}
	return lines
}

func bedrockOpts(input string) PlanOptions {
	o := opts(input)
	o.Provider, o.Model = "bedrock", "anthropic.claude-3-haiku-20240307-v1:0"
	return o
}

// With a minimum, plan balances the records over the fewest shards its
// limits allow, so no shard is a small remainder; without one it fills
// each shard in turn (the layout of existing plans).
func TestPlanBalancesToMinimum(t *testing.T) {
	lineBytes := int64(len(bedrockLine(0)) + 1)
	cases := []struct {
		name       string
		records    int
		maxRecords int
		maxBytes   int64
		min        int
		shuffle    bool
		want       []int64
	}{
		{"2050 at 1000, minimum 100", 2050, 1000, 0, 100, false, []int64{684, 683, 683}},
		{"2050 at 1000, minimum 100, input out of key order", 2050, 1000, 0, 100, true, []int64{684, 683, 683}},
		{"no minimum: filled in turn", 2050, 1000, 0, 0, false, []int64{1000, 1000, 50}},
		{"one shard is left alone", 500, 1000, 0, 100, false, []int64{500}},
		// 300 at 200 records would be 150+150, but 110 lines fill the byte limit:
		// three shards, spread again.
		{"byte limit adds a shard, spread again", 300, 200, 110 * lineBytes, 100, false, []int64{100, 100, 100}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLake(t)
			o := bedrockOpts(writeFile(t, "in.jsonl", bedrockLines(c.records, c.shuffle), "\n"))
			o.ShardMaxRecords, o.ShardMaxBytes, o.MinRecords = c.maxRecords, c.maxBytes, c.min
			res, err := Plan(context.Background(), l, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.MinRecords != c.min {
				t.Errorf("min_records %d, want %d", res.MinRecords, c.min)
			}
			var got []int64
			for _, s := range res.Shards {
				got = append(got, s.Records)
				if c.maxBytes > 0 && s.Bytes > c.maxBytes {
					t.Errorf("shard %s is %d bytes, over %d", s.ShardID, s.Bytes, c.maxBytes)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("shards of %v records, want %v", got, c.want)
			}
			// Each shard file holds the records the manifest says.
			m, err := l.GetManifest(context.Background(), mustDigest(t, res.JobKey))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range m.Shards {
				b, err := l.GetObject(context.Background(), s.Object)
				if err != nil {
					t.Fatal(err)
				}
				if n := int64(bytes.Count(b, []byte("\n"))); n != s.Records {
					t.Errorf("shard %s file holds %d lines, manifest says %d", s.ShardID, n, s.Records)
				}
			}
		})
	}
}

// Below the minimum plan refuses (exit 2, naming the minimum), plans anyway
// when allowed, or plans and holds the job.
func TestPlanBelowMinimum(t *testing.T) {
	cases := []struct {
		policy   string
		wantErr  bool
		wantHeld bool
	}{
		{"", true, false},
		{BelowMinRefuse, true, false},
		{BelowMinAllow, false, false},
		{BelowMinHold, false, true},
	}
	for _, c := range cases {
		t.Run("policy "+c.policy, func(t *testing.T) {
			l := newLake(t)
			o := bedrockOpts(writeFile(t, "in.jsonl", bedrockLines(50, false), "\n"))
			o.MinRecords, o.BelowMin = DefaultMinRecords("bedrock"), c.policy
			res, err := Plan(context.Background(), l, o)
			if c.wantErr {
				if !errors.Is(err, errkind.ErrBadInput) || !strings.Contains(err.Error(), "minimum of 100") || !strings.Contains(err.Error(), "--below-min allow") {
					t.Fatalf("plan of 50 records, minimum 100: %v; want a usage error naming the minimum", err)
				}
				if k := keys(t, l); len(k) != 0 {
					t.Fatalf("a refused plan wrote %v", k)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m, err := l.GetManifest(context.Background(), mustDigest(t, res.JobKey))
			if err != nil {
				t.Fatal(err)
			}
			if held := m.Held != "" && strings.Contains(m.Held, "50 records") && res.Held == m.Held; held != c.wantHeld {
				t.Fatalf("held %q (result %q), want held=%v", m.Held, res.Held, c.wantHeld)
			}
			if m.MinRecords != 100 || res.Records != 50 {
				t.Fatalf("manifest min_records %d, %d records", m.MinRecords, res.Records)
			}
			if (m.BelowMin == BelowMinAllow) != (c.policy == BelowMinAllow) {
				t.Fatalf("manifest below_min %q for policy %q", m.BelowMin, c.policy)
			}
		})
	}
}

func TestDefaultMinRecords(t *testing.T) {
	for p, want := range map[string]int{"bedrock": 100, "openai": 0, "anthropic": 0, "gemini": 0} {
		if got := DefaultMinRecords(p); got != want {
			t.Errorf("DefaultMinRecords(%s) = %d, want %d", p, got, want)
		}
	}
}
