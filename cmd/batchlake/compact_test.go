package main

import (
	"fmt"
	"testing"
)

// TestCompactCommand: on the simulator's whole loop, `compact` covers the
// lake's jobs, `sql` answers the same over the compaction as without it
// (including a job run after it), `verify` passes with it, and compacting
// an unchanged lake writes nothing.
func TestCompactCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulator's whole loop twice")
	}
	t.Parallel()
	lk, _ := demoLake(t) // tenant acme's job
	runJob := func(tenant string) {
		if code, res := cli(t, "run", "--lake", lk, "--provider", "sim", "--input", demoInput, "--tenant", tenant,
			"--prompt-version", "v1", "--poll", "10ms", "--progress", "never"); code != exitOK {
			t.Fatalf("run: exit %d %v", code, res)
		}
	}
	queries := []string{
		"SELECT tenant, sum(cost_usd) FROM costs GROUP BY 1 ORDER BY 1",
		"SELECT tenant, final_state, count(*), sum(cost_usd) FROM records GROUP BY ALL ORDER BY ALL",
		"SELECT job_key, shard_id, seq, state FROM ledger ORDER BY ALL",
	}
	answers := func() []string {
		var out []string
		for _, q := range queries {
			code, stdout, stderr := cliRaw("sql", "--lake", lk, "--format", "csv", q)
			if code != exitOK {
				t.Fatalf("sql %q: exit %d\n%s", q, code, stderr)
			}
			out = append(out, stdout)
		}
		return out
	}
	same := func(what string, got, want []string) {
		t.Helper()
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: %q\ngot  %s\nwant %s", what, queries[i], got[i], want[i])
			}
		}
	}
	before := answers()
	code, res := cli(t, "compact", "--lake", lk)
	if code != exitOK || res["jobs"] == nil || res["key"] == "" {
		t.Fatalf("compact: exit %d %v", code, res)
	}
	same("after compact", answers(), before)
	if code, res := cli(t, "verify", "--lake", lk); code != exitOK || res["ok"] != true {
		t.Fatalf("verify: exit %d %v", code, res)
	}
	runJob("globex")
	live := answers()
	if live[0] == before[0] {
		t.Fatal("the second job changed nothing: the test would prove nothing")
	}
	code, res = cli(t, "compact", "--lake", lk)
	if code != exitOK {
		t.Fatalf("compact again: exit %d %v", code, res)
	}
	same("after the second compact", answers(), live)
	if code, res := cli(t, "verify", "--lake", lk); code != exitOK || res["ok"] != true {
		t.Fatalf("verify: exit %d %v", code, res)
	}
	// Nothing new or changed: nothing written, the latest compaction stands.
	code, again := cli(t, "compact", "--lake", lk)
	if code != exitOK || again["key"] != res["key"] || fmt.Sprint(again["jobs_written"]) != "0" || again["jobs"] != res["jobs"] || again["segments"] != res["segments"] {
		t.Fatalf("compact of an unchanged lake: exit %d %v, want the key, jobs and segments of %v and no job written", code, again, res)
	}
}
