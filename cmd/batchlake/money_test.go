package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// usdStrings returns the paths of every value under a key naming USD
// ("cost_usd", "total_usd", "billed_usd", …, and everything inside such a
// key's object) that is not a JSON number, and how many USD values it saw.
func usdStrings(v any, path string, inUSD bool) (bad []string, seen int) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			b, n := usdStrings(e, path+"."+k, inUSD || strings.Contains(strings.ToLower(k), "usd"))
			bad, seen = append(bad, b...), seen+n
		}
	case []any:
		for _, e := range x {
			b, n := usdStrings(e, path+"[]", inUSD)
			bad, seen = append(bad, b...), seen+n
		}
	case json.Number:
		if inUSD {
			seen++
		}
	default:
		if inUSD && x != nil {
			bad = append(bad, path)
			seen++
		}
	}
	return bad, seen
}

// TestUSDIsANumberInJSON: every amount of USD the commands print as JSON is
// a JSON number, never a string (a report's max_record_cost_usd, the cap it
// ran with, was a string).
func TestUSDIsANumberInJSON(t *testing.T) {
	t.Parallel()
	lk, job := demoLake(t)
	for _, args := range [][]string{
		{"reconcile", "--job", job, "--max-record-cost-usd", "0.25", "--max-attempts", "9"},
		{"report", "--job", job},
		{"jobs"},
		{"cost", "--format", "json"},
		{"cost", "--format", "json", "--by", "model,job"},
		{"cost", "--format", "json", "--estimate"},
		{"manual"},
		{"sql", "--format", "json", "SELECT sum(cost_usd) AS cost_usd FROM costs"},
	} {
		t.Run(strings.Join(args[:1], " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(append(args, "--lake", lk), &out, &errb)
			if code != exitOK && code != exitPartial && code != exitReview {
				t.Fatalf("%v: exit %d\n%s", args, code, errb.String())
			}
			d := json.NewDecoder(&out)
			d.UseNumber()
			var v any
			if err := d.Decode(&v); err != nil {
				t.Fatalf("%v: stdout is not JSON: %v", args, err)
			}
			bad, seen := usdStrings(v, "", false)
			if seen == 0 {
				t.Fatalf("%v printed no USD at all: the check proves nothing\n%s", args, out.String())
			}
			if len(bad) > 0 {
				t.Errorf("%v: USD not a number at %v", args, bad)
			}
		})
	}
}
