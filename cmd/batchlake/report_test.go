package main

import (
	"bytes"
	"encoding/json"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// costTableTotal runs `cost --format json` with args and adds its rows'
// cost_usd exactly.
func costTableTotal(t *testing.T, args ...string) *big.Rat {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(append([]string{"cost", "--format", "json"}, args...), &out, &errb); code != exitOK {
		t.Fatalf("cost %v: exit %d\n%s", args, code, errb.String())
	}
	d := json.NewDecoder(&out)
	d.UseNumber()
	var rows []map[string]any
	if err := d.Decode(&rows); err != nil {
		t.Fatalf("cost %v: %v", args, err)
	}
	total := new(big.Rat)
	for _, r := range rows {
		n, ok := r["cost_usd"].(json.Number)
		if !ok {
			t.Fatalf("cost row %v: cost_usd is not a number", r)
		}
		x, _ := new(big.Rat).SetString(n.String())
		total.Add(total, x)
	}
	return total
}

// TestReportTenantAndLake: `report --tenant` and `report --all [--since]`
// cover the jobs they say, across two tenants' simulated runs; their total
// equals the cost command's for the same jobs to the last digit, their jobs'
// costs add up to it, and the page shows the jobs, tenants and the cost over
// time; wrong flag combinations and an unknown tenant are usage errors.
func TestReportTenantAndLake(t *testing.T) {
	t.Parallel()
	// Tenant acme's run is a copy of the demo lake; beta's runs on it.
	lk, _ := demoLake(t)
	dir := filepath.Dir(lk)
	jobs, anyJob := map[string]int{}, ""
	code, res := cli(t, "run", "--lake", lk, "--provider", "sim", "--input", demoInput,
		"--tenant", "beta", "--prompt-version", "v1", "--poll", "1ms", "--progress", "never")
	if code != exitOK {
		t.Fatalf("run beta: exit %d %v", code, res)
	}
	_, list := cli(t, "jobs", "--lake", lk)
	for _, j := range list["jobs"].([]any) {
		jobs[j.(map[string]any)["tenant"].(string)]++
		anyJob = j.(map[string]any)["job_key"].(string)
	}
	if jobs["acme"] < 2 || jobs["beta"] < 2 {
		t.Fatalf("jobs per tenant %v: the demo retries, each tenant should have a family", jobs)
	}
	yesterday, tomorrow := time.Now().UTC().AddDate(0, 0, -1).Format("2006-01-02"), time.Now().UTC().AddDate(0, 0, 1).Format("2006-01-02")

	for _, c := range []struct {
		name     string
		args     []string
		costArgs []string
		jobs     int
		tenants  string
	}{
		{"tenant acme", []string{"--tenant", "acme"}, []string{"--tenant", "acme"}, jobs["acme"], "acme"},
		{"tenant beta", []string{"--tenant", "beta"}, []string{"--tenant", "beta"}, jobs["beta"], "beta"},
		{"all", []string{"--all"}, nil, jobs["acme"] + jobs["beta"], "acme, beta"},
		{"all since yesterday", []string{"--all", "--since", yesterday}, nil, jobs["acme"] + jobs["beta"], "acme, beta"},
		{"tenant since tomorrow", []string{"--tenant", "acme", "--since", tomorrow}, nil, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			page := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".html")
			code, rep := cli(t, append([]string{"report", "--lake", lk, "--html", page}, c.args...)...)
			if code != exitOK {
				t.Fatalf("report %v: exit %d %v", c.args, code, rep)
			}
			gens := rep["generations"].([]any)
			if len(gens) != c.jobs {
				t.Errorf("report %v has %d jobs, want %d", c.args, len(gens), c.jobs)
			}
			total, _ := new(big.Rat).SetString(rep["cost_total_usd"].(json.Number).String())
			if c.jobs == 0 {
				if total.Sign() != 0 {
					t.Errorf("a report of no job costs %s", total.FloatString(18))
				}
			} else if table := costTableTotal(t, append([]string{"--lake", lk}, c.costArgs...)...); total.Cmp(table) != 0 || total.Sign() == 0 {
				t.Errorf("report total %s, cost table %s", total.FloatString(18), table.FloatString(18))
			}
			byJob := new(big.Rat)
			for _, g := range gens {
				x, _ := new(big.Rat).SetString(g.(map[string]any)["cost_usd"].(json.Number).String())
				byJob.Add(byJob, x)
			}
			if byJob.Cmp(total) != 0 {
				t.Errorf("jobs add up to %s, total %s", byJob.FloatString(18), total.FloatString(18))
			}
			b, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			ids := htmlIDs(t, b)
			if ids["jobs"] != big.NewInt(int64(c.jobs)).String() || ids["tenants"] != c.tenants {
				t.Errorf("page jobs %q tenants %q, want %d and %q", ids["jobs"], ids["tenants"], c.jobs, c.tenants)
			}
			if ids["cost-total@value"] != rep["cost_total_usd"].(json.Number).String() {
				t.Errorf("page total %q, JSON %v", ids["cost-total@value"], rep["cost_total_usd"])
			}
			if c.jobs > 0 && !bytes.Contains(b, []byte(`<svg id="chart-day"`)) {
				t.Error("page has no cost-over-time chart")
			}
		})
	}

	// Days and --since are UTC whatever the process's time zone: run the
	// command where the local date is a day ahead of UTC (UTC+14) and a day
	// behind (UTC-11); at any hour one of them differs from UTC.
	_, allRep := cli(t, "report", "--lake", lk, "--all")
	utcDays := map[string]bool{}
	var first, last time.Time
	for _, g := range allRep["generations"].([]any) {
		for _, k := range []string{"created_at", "reconciled_at"} {
			at, err := time.Parse(time.RFC3339Nano, g.(map[string]any)[k].(string))
			if err != nil {
				t.Fatal(err)
			}
			utcDays[at.UTC().Format("2006-01-02")] = true
			if first.IsZero() || at.Before(first) {
				first = at
			}
			if at.After(last) {
				last = at
			}
		}
	}
	for _, tz := range []string{"Pacific/Kiritimati", "Pacific/Pago_Pago"} {
		t.Run("TZ="+tz, func(t *testing.T) {
			for _, c := range []struct {
				since string
				jobs  int
			}{
				{first.UTC().Format("2006-01-02"), jobs["acme"] + jobs["beta"]},
				{last.UTC().AddDate(0, 0, 1).Format("2006-01-02"), 0},
			} {
				cmd := exec.Command(binary(t), "report", "--lake", lk, "--all", "--since", c.since)
				cmd.Env = append(os.Environ(), "TZ="+tz)
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("report --since %s: %v", c.since, err)
				}
				var rep struct {
					Generations []any `json:"generations"`
					Days        []struct {
						Key string `json:"key"`
					} `json:"cost_by_day"`
				}
				if err := json.Unmarshal(out, &rep); err != nil {
					t.Fatal(err)
				}
				if len(rep.Generations) != c.jobs {
					t.Errorf("--since %s: %d jobs, want %d (planned between %s and %s)", c.since, len(rep.Generations), c.jobs, first.UTC().Format(time.RFC3339), last.UTC().Format(time.RFC3339))
				}
				for _, d := range rep.Days {
					if !utcDays[d.Key] {
						t.Errorf("cost day %s is not a UTC day of the jobs (%v)", d.Key, utcDays)
					}
				}
			}
		})
	}

	for _, c := range []struct {
		name string
		args []string
	}{
		{"job and tenant", []string{"--job", anyJob, "--tenant", "acme"}},
		{"tenant and all", []string{"--tenant", "acme", "--all"}},
		{"since with job", []string{"--job", anyJob, "--since", yesterday}},
		{"bad since", []string{"--all", "--since", "last week"}},
		{"unknown tenant", []string{"--tenant", "nobody"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(append([]string{"report", "--lake", lk}, c.args...), &out, &errb)
			if code != exitUsage {
				t.Errorf("report %v: exit %d, want %d\n%s", c.args, code, exitUsage, errb.String())
			}
			t.Logf("report %v: %s", c.args, strings.TrimSpace(errb.String()+out.String()))
		})
	}
}
