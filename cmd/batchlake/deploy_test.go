package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/batchlake/batchlake/lake"
	"github.com/batchlake/batchlake/reconcile"
)

// invocation is one batchlake command line found in a deploy file.
type invocation struct {
	where string
	args  []string // after "batchlake"
}

// checkInvocations fails for any sub-command or flag the binary does not have.
func checkInvocations(t *testing.T, invs []invocation) {
	t.Helper()
	root := newRoot(context.Background(), &globals{stdout: io.Discard}, io.Discard)
	if len(invs) == 0 {
		t.Fatal("no batchlake invocations found")
	}
	for _, inv := range invs {
		if len(inv.args) == 0 {
			t.Errorf("%s: bare batchlake", inv.where)
			continue
		}
		var sub *cobra.Command
		for _, c := range root.Commands() {
			if c.Name() == inv.args[0] {
				sub = c
			}
		}
		if sub == nil {
			t.Errorf("%s: batchlake has no command %q", inv.where, inv.args[0])
			continue
		}
		for _, a := range inv.args[1:] {
			if !strings.HasPrefix(a, "--") {
				continue
			}
			name := strings.SplitN(strings.TrimPrefix(a, "--"), "=", 2)[0]
			if sub.Flags().Lookup(name) == nil && root.PersistentFlags().Lookup(name) == nil {
				t.Errorf("%s: batchlake %s has no flag --%s", inv.where, sub.Name(), name)
			}
		}
	}
}

// usedFlags lists "command --flag" for every flag the invocations use.
func usedFlags(invs []invocation) map[string]bool {
	out := map[string]bool{}
	for _, inv := range invs {
		for _, a := range inv.args[1:] {
			if strings.HasPrefix(a, "--") {
				out[inv.args[0]+" "+strings.SplitN(a, "=", 2)[0]] = true
			}
		}
	}
	return out
}

// fanOutFlags are what a deployment needs to run past one machine: collect
// per shard, reconcile per partition, then the merge.
var fanOutFlags = []string{"collect --shard", "reconcile --partition", "reconcile --merge", "reconcile --partitions"}

func checkFanOut(t *testing.T, where string, invs []invocation) {
	t.Helper()
	used := usedFlags(invs)
	for _, f := range fanOutFlags {
		if !used[f] {
			t.Errorf("%s never runs batchlake %s", where, f)
		}
	}
}

var cmdLine = regexp.MustCompile(`batchlake\s+([a-z]+)((?:\s+[^\s;|>&"\]]+)*)`)

func fromText(where, s string) []invocation {
	var out []invocation
	for _, m := range cmdLine.FindAllStringSubmatch(s, -1) {
		out = append(out, invocation{where, append([]string{m[1]}, strings.Fields(m[2])...)})
	}
	return out
}

// walkYAML collects command lines from both list form ([batchlake, submit, --lake, …])
// and shell strings ("batchlake plan --lake …").
func walkYAML(where string, n *yaml.Node) []invocation {
	var out []invocation
	switch n.Kind {
	case yaml.SequenceNode:
		if len(n.Content) > 0 && n.Content[0].Value == "batchlake" {
			var args []string
			for _, c := range n.Content[1:] {
				args = append(args, c.Value)
			}
			return []invocation{{where, args}}
		}
	case yaml.ScalarNode:
		return fromText(where, n.Value)
	}
	for _, c := range n.Content {
		out = append(out, walkYAML(where, c)...)
	}
	return out
}

func TestArgoWorkflowTemplate(t *testing.T) {
	p := filepath.Join("..", "..", "deploy", "argo", "batchlake-workflowtemplate.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s does not parse: %v", p, err)
	}
	var wt struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Entrypoint string `yaml:"entrypoint"`
			Templates  []struct {
				Name string `yaml:"name"`
			} `yaml:"templates"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &wt); err != nil || wt.Kind != "WorkflowTemplate" {
		t.Fatalf("not a WorkflowTemplate: %v", err)
	}
	names := map[string]bool{}
	for _, tp := range wt.Spec.Templates {
		names[tp.Name] = true
	}
	for _, want := range []string{wt.Spec.Entrypoint, "plan", "submit", "status", "collect", "reconcile-partition", "merge", "retry"} {
		if !names[want] {
			t.Errorf("template %q missing", want)
		}
	}
	invs := walkYAML(p, &doc)
	checkInvocations(t, invs)
	seen := map[string]bool{}
	for _, inv := range invs {
		seen[inv.args[0]] = true
	}
	for _, c := range []string{"plan", "submit", "status", "collect", "reconcile", "retry"} {
		if !seen[c] {
			t.Errorf("the workflow never runs batchlake %s", c)
		}
	}
	if !strings.Contains(string(b), "lastRetry.exitCode) == 75") {
		t.Error("no retry keyed on exit 75")
	}
	checkFanOut(t, p, invs)
	// Collect fans out over the shards, reconcile over the partitions; the
	// round's branches after the merge are walked in TestArgoExitCodePaths.
	for _, want := range []string{"withParam:", "{{item.shard_id}}", "withSequence:", "{{item}}/{{inputs.parameters.partitions}}"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("workflow lacks %q", want)
		}
	}
}

var pyList = regexp.MustCompile(`\["batchlake",([^\]]*)\]`)

func TestAirflowDAG(t *testing.T) {
	p := filepath.Join("..", "..", "deploy", "airflow", "batchlake_dag.py")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if py, err := exec.LookPath("python3"); err == nil {
		if out, err := exec.Command(py, "-B", "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])", p).CombinedOutput(); err != nil {
			t.Fatalf("%s does not compile: %v\n%s", p, err, out)
		}
	}
	src := string(b)
	var invs []invocation
	for _, m := range pyList.FindAllStringSubmatch(src, -1) {
		var args []string
		for _, a := range strings.Split(m[1], ",") {
			a = strings.TrimSpace(a)
			if strings.HasPrefix(a, `"`) {
				args = append(args, strings.Trim(a, `"`))
			}
		}
		invs = append(invs, invocation{p, args})
	}
	invs = append(invs, fromText(p, pyList.ReplaceAllString(src, ""))...)
	checkInvocations(t, invs)
	checkFanOut(t, p, invs)
	for _, want := range []string{"BashSensor", "retry_exit_code=75", "shard_ids.map(", ".expand(part=", "after_merge(p.returncode, p.stdout)"} {
		if !strings.Contains(src, want) {
			t.Errorf("DAG lacks %q", want)
		}
	}
}

// exitPath is one way a reconcile --merge can end, and what the orchestrator
// contract (README "Exit codes") says the round does next.
type exitPath struct {
	name       string
	code       int
	retry      int64 // the report's retry_records
	noRetryKey bool  // a report without retry_records: never read as "nothing to retry"
	wantRetry  bool  // retry, then the child's round
	wantAlert  bool  // a visible failure for a person
	wantRerun  bool  // the merge runs again (1, 75)
	wantFail   bool  // the run fails without a rerun (2)
}

var exitPaths = []exitPath{
	{name: "0 completed", code: 0},
	{name: "10 partial with a retry shard", code: 10, retry: 5, wantRetry: true},
	{name: "10 partial, every record to the manual queue", code: 10},
	{name: "11 unknown ids and a retry shard", code: 11, retry: 5, wantRetry: true, wantAlert: true},
	{name: "11 unknown ids, nothing to retry", code: 11, wantAlert: true},
	{name: "11 report without retry_records", code: 11, noRetryKey: true, wantRerun: true},
	{name: "75 not yet", code: 75, wantRerun: true},
	{name: "1 error", code: 1, wantRerun: true},
	{name: "2 bad input", code: 2, wantFail: true},
}

// mergeStdout is what batchlake reconcile --merge prints for a path: the
// report as the command prints it (printJSON), or the error object.
func mergeStdout(t *testing.T, p exitPath, job string) string {
	t.Helper()
	var buf strings.Builder
	switch p.code {
	case 0, 10, 11:
		rep := reconcile.Report{JobKey: job, State: lake.Completed, Counts: reconcile.Counts{Expected: 10, Succeeded: 10}, RetryRecords: p.retry,
			RetryShards: []string{}, Report: "reports/" + job + "/" + strings.Repeat("ab", 32) + ".json"}
		if p.code != 0 {
			rep.State, rep.Succeeded, rep.FailedRetryable = lake.Partial, 10-p.retry, p.retry
			if p.retry > 0 {
				rep.RetryShards = []string{"objects/sha256/cd/" + strings.Repeat("cd", 32)}
			}
		}
		if p.code == 11 {
			rep.Unknown = 1
		}
		if p.code == 10 && p.retry == 0 {
			// Missing records past --max-attempts: PARTIAL, all to the manual queue.
			rep.FailedRetryable, rep.Missing, rep.ManualRecords, rep.Succeeded = 0, 3, 3, 7
		}
		if got := reportCode(&rep); got != p.code {
			t.Fatalf("the stub report exits %d, the case wants %d", got, p.code)
		}
		printJSON(&buf, rep)
		if p.noRetryKey {
			var m map[string]any
			if err := json.Unmarshal([]byte(buf.String()), &m); err != nil {
				t.Fatal(err)
			}
			delete(m, "retry_records")
			buf.Reset()
			printJSON(&buf, m)
		}
	default:
		printJSON(&buf, map[string]any{"error": "stub", "exit_code": p.code})
	}
	return buf.String()
}

type argoParam struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom struct {
		Path string `yaml:"path"`
	} `yaml:"valueFrom"`
}

type argoStep struct {
	Name      string `yaml:"name"`
	Template  string `yaml:"template"`
	When      string `yaml:"when"`
	Arguments struct {
		Parameters []argoParam `yaml:"parameters"`
	} `yaml:"arguments"`
}

type argoTemplate struct {
	Name      string       `yaml:"name"`
	Steps     [][]argoStep `yaml:"steps"`
	Container *struct {
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
	} `yaml:"container"`
	Outputs struct {
		Parameters []argoParam `yaml:"parameters"`
	} `yaml:"outputs"`
	RetryStrategy *struct {
		Expression string `yaml:"expression"`
	} `yaml:"retryStrategy"`
}

var argoTag = regexp.MustCompile(`\{\{[^}]*\}\}`)

// substitute replaces Argo's simple tags; a tag it has no value for fails.
func substitute(t *testing.T, s string, vars map[string]string) string {
	t.Helper()
	return argoTag.ReplaceAllStringFunc(s, func(tag string) string {
		v, ok := vars[strings.TrimSpace(tag[2:len(tag)-2])]
		if !ok {
			t.Fatalf("no value for %s in %q", tag, s)
		}
		return v
	})
}

// evalWhen evaluates the comparisons Argo's when and retryStrategy
// expressions use here: a || b, a && b, and ==, !=, >, <, >=, <= between
// numbers or bare words (govaluate reads a bare word as a string in Argo).
func evalWhen(t *testing.T, expr string) bool {
	t.Helper()
	for _, or := range strings.Split(expr, "||") {
		all := true
		for _, and := range strings.Split(or, "&&") {
			all = all && evalCmp(t, strings.TrimSpace(and))
		}
		if all {
			return true
		}
	}
	return false
}

func evalCmp(t *testing.T, s string) bool {
	t.Helper()
	for _, op := range []string{"==", "!=", ">=", "<=", ">", "<"} {
		l, r, ok := strings.Cut(s, op)
		if !ok {
			continue
		}
		l, r = strings.TrimSpace(l), strings.TrimSpace(r)
		lf, e1 := strconv.ParseFloat(l, 64)
		rf, e2 := strconv.ParseFloat(r, 64)
		if e1 != nil || e2 != nil {
			if op != "==" && op != "!=" {
				t.Fatalf("%q: %s between non-numbers", s, op)
			}
			return (l == r) == (op == "==")
		}
		switch op {
		case "==":
			return lf == rf
		case "!=":
			return lf != rf
		case ">=":
			return lf >= rf
		case "<=":
			return lf <= rf
		case ">":
			return lf > rf
		default:
			return lf < rf
		}
	}
	t.Fatalf("no comparison in %q", s)
	return false
}

// runContainer runs a template's shell command here, with the given inputs,
// /tmp/ moved into dir and a stub batchlake first on PATH; it returns the
// exit code and the output parameters read from their files.
func runContainer(t *testing.T, tpl argoTemplate, inputs map[string]string, dir, stubDir string, env ...string) (int, map[string]string) {
	t.Helper()
	if tpl.Container == nil || len(tpl.Container.Command) == 0 || tpl.Container.Command[0] != "sh" {
		t.Fatalf("template %s is not a shell command", tpl.Name)
	}
	vars := map[string]string{}
	for k, v := range inputs {
		vars["inputs.parameters."+k] = v
	}
	argv := append(append([]string{}, tpl.Container.Command...), tpl.Container.Args...)
	for i := range argv {
		argv[i] = strings.ReplaceAll(substitute(t, argv[i], vars), "/tmp/", dir+"/")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "PATH="+stubDir+string(os.PathListSeparator)+os.Getenv("PATH")), env...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	code := 0
	if err := cmd.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%s: %v", tpl.Name, err)
		}
		code = ee.ExitCode()
	}
	out := map[string]string{}
	if code == 0 {
		for _, p := range tpl.Outputs.Parameters {
			b, err := os.ReadFile(strings.ReplaceAll(p.ValueFrom.Path, "/tmp/", dir+"/"))
			if err != nil {
				t.Fatalf("%s: output %s: %v", tpl.Name, p.Name, err)
			}
			out[p.Name] = string(b)
		}
	}
	return code, out
}

// TestArgoExitCodePaths runs the WorkflowTemplate's merge step (its real
// shell, with a stub batchlake printing a real report) for every exit code
// and walks the round's steps after it as Argo would: when expressions,
// step groups (a group waits for all its steps; a failed step stops the steps
// after its group) and the merge's retryStrategy.
func TestArgoExitCodePaths(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "argo", "batchlake-workflowtemplate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var wt struct {
		Spec struct {
			Templates []argoTemplate `yaml:"templates"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &wt); err != nil {
		t.Fatal(err)
	}
	tpls := map[string]argoTemplate{}
	for _, tp := range wt.Spec.Templates {
		tpls[tp.Name] = tp
	}
	round, merge := tpls["round"], tpls["merge"]
	after := -1
	for i, g := range round.Steps {
		for _, s := range g {
			if s.Name == "merge" {
				after = i + 1
			}
		}
	}
	if after < 0 || merge.RetryStrategy == nil {
		t.Fatal("the round has no merge step with a retryStrategy")
	}
	stubDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(stubDir, "batchlake"), []byte("#!/bin/sh\ncat \"$STUB_OUT\"\nexit \"$STUB_CODE\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	job := strings.Repeat("ef", 32)
	for _, p := range exitPaths {
		t.Run(p.name, func(t *testing.T) {
			dir := t.TempDir()
			stdout := filepath.Join(dir, "stub-stdout")
			if err := os.WriteFile(stdout, []byte(mergeStdout(t, p, job)), 0o644); err != nil {
				t.Fatal(err)
			}
			code, out := runContainer(t, merge, map[string]string{"job": job, "lake": "s3://b/lake", "partitions": "4"}, dir, stubDir,
				"STUB_OUT="+stdout, "STUB_CODE="+strconv.Itoa(p.code))
			if code != 0 {
				expr := strings.ReplaceAll(merge.RetryStrategy.Expression, "asInt(lastRetry.exitCode)", strconv.Itoa(code))
				if rerun := evalWhen(t, expr); rerun != p.wantRerun || p.wantFail == p.wantRerun {
					t.Fatalf("merge exits %d: rerun %v; want rerun %v, fail %v", code, rerun, p.wantRerun, p.wantFail)
				}
				return
			}
			if p.wantRerun || p.wantFail {
				t.Fatalf("merge exits 0 for batchlake's %d: the workflow goes on as if reconciled", p.code)
			}
			vars := map[string]string{"inputs.parameters.job": job, "inputs.parameters.lake": "s3://b/lake",
				"inputs.parameters.provider": "openai", "inputs.parameters.partitions": "4"}
			for k, v := range out {
				vars["steps.merge.outputs.parameters."+k] = v
			}
			ran, failed := map[string]bool{}, false
			for _, g := range round.Steps[after:] {
				if failed {
					break // Argo runs no step group after a failed one
				}
				for _, s := range g {
					if !evalWhen(t, substitute(t, s.When, vars)) {
						continue
					}
					ran[s.Name] = true
					tpl := tpls[s.Template]
					if tpl.Container == nil || tpl.Container.Command[0] != "sh" {
						continue // batchlake retry and the child's round: assumed to succeed
					}
					in := map[string]string{}
					for _, a := range s.Arguments.Parameters {
						in[a.Name] = substitute(t, a.Value, vars)
					}
					if c, _ := runContainer(t, tpl, in, dir, stubDir); c != 0 {
						failed = true
					}
				}
			}
			if ran["retry"] != p.wantRetry || ran["next-round"] != p.wantRetry {
				t.Errorf("retry ran %v, the child's round %v; want %v (retry_records %d, exit %d)", ran["retry"], ran["next-round"], p.wantRetry, p.retry, p.code)
			}
			if failed != p.wantAlert || ran["alert"] != p.wantAlert {
				t.Errorf("alert ran %v and the workflow failed %v; want both %v (exit %d)", ran["alert"], failed, p.wantAlert, p.code)
			}
		})
	}
}

// TestAirflowExitCodePaths runs the DAG's decision after the merge,
// after_merge (a pure function in the DAG file), with python3 on every exit
// path: Airflow itself cannot be imported here, so the function is compiled
// from the file's syntax tree alone.
func TestAirflowExitCodePaths(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: the DAG's after_merge is not run")
	}
	p := filepath.Join("..", "..", "deploy", "airflow", "batchlake_dag.py")
	src, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// The wiring: retry and alert both hang off the merge; nothing waits for the alert.
	for _, want := range []string{"child = retry(merged)", "alert(merged)\n", ">> merged >> child >> next_round"} {
		if !strings.Contains(string(src), want) {
			t.Errorf("DAG lacks %q", want)
		}
	}
	const runner = `
import ast, json, sys
tree = ast.parse(open(sys.argv[1]).read(), sys.argv[1])
fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "after_merge"]
if not fns:
    sys.exit(sys.argv[1] + " has no top-level function after_merge")
ns = {"json": json}
exec(compile(ast.Module(body=fns, type_ignores=[]), sys.argv[1], "exec"), ns)
out = []
for case in json.load(sys.stdin):
    try:
        out.append(ns["after_merge"](case["code"], case["stdout"]))
    except Exception as e:
        out.append({"error": str(e)})
print(json.dumps(out))
`
	type pyCase struct {
		Code   int    `json:"code"`
		Stdout string `json:"stdout"`
	}
	job := strings.Repeat("ef", 32)
	var cases []pyCase
	for _, c := range exitPaths {
		cases = append(cases, pyCase{c.code, mergeStdout(t, c, job)})
	}
	in, _ := json.Marshal(cases)
	cmd := exec.Command(py, "-B", "-c", runner, p)
	cmd.Stdin = strings.NewReader(string(in))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v: %s", err, stderr.String())
	}
	var got []struct {
		Retry, Alert, Rerun, Fail bool
		Error                     string
	}
	if err := json.Unmarshal(raw, &got); err != nil || len(got) != len(exitPaths) {
		t.Fatalf("after_merge printed %s (%v)", raw, err)
	}
	for i, c := range exitPaths {
		t.Run(c.name, func(t *testing.T) {
			g := got[i]
			if c.noRetryKey {
				// Raised in the merge task: Airflow retries it, then fails it.
				if g.Error == "" {
					t.Fatalf("a report without retry_records was decided on: %+v", g)
				}
				return
			}
			if g.Error != "" || g.Retry != c.wantRetry || g.Alert != c.wantAlert || g.Rerun != c.wantRerun || g.Fail != c.wantFail {
				t.Errorf("after_merge(%d) = %+v; want retry %v alert %v rerun %v fail %v", c.code, g, c.wantRetry, c.wantAlert, c.wantRerun, c.wantFail)
			}
		})
	}
}
