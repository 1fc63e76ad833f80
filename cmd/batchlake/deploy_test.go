package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
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

const pyInvocations = `
import ast, json, sys
tree = ast.parse(open(sys.argv[1]).read(), sys.argv[1])
def strs(elts):
    return [e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else "<expr>" for e in elts]
out = []
for n in ast.walk(tree):
    if isinstance(n, ast.List) and n.elts and isinstance(n.elts[0], ast.Constant) and n.elts[0].value == "batchlake":
        if not any(isinstance(e, ast.Starred) for e in n.elts):  # not the wrapper's own ["batchlake", *args]
            out.append(strs(n.elts[1:]))
    if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "batchlake" and n.args and isinstance(n.args[0], ast.List):
        out.append(strs(n.args[0].elts))
print(json.dumps(out))
`

func TestAirflowDAG(t *testing.T) {
	t.Parallel()
	p := filepath.Join("..", "..", "deploy", "airflow", "batchlake_dag.py")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	// The command lines, from the syntax tree: ["batchlake", "reconcile", …]
	// and the wrapper's batchlake(["plan", …]); an argument that is not a
	// string literal (params["lake"]) stands as <expr>.
	raw := runPython(t, pyInvocations, nil, p)
	var lines [][]string
	if err := json.Unmarshal(raw, &lines); err != nil {
		t.Fatal(err)
	}
	var invs []invocation
	for _, args := range lines {
		invs = append(invs, invocation{p, args})
	}
	// …and any command line the comments and docstrings name.
	invs = append(invs, fromText(p, src)...)
	checkInvocations(t, invs)
	checkFanOut(t, p, invs)
	seen := map[string]bool{}
	for _, inv := range invs {
		seen[inv.args[0]] = true
	}
	for _, c := range []string{"plan", "submit", "status", "collect", "reconcile", "retry", "sql"} {
		if !seen[c] {
			t.Errorf("the DAG never runs batchlake %s", c)
		}
	}
	// submit and status are sensors (75: poke again); collect fans out over
	// the shards, reconcile over the partitions.
	for _, want := range []string{"@task.sensor(", "def submit(", "def status(", ".expand(shard=shard_ids)", ".expand(part=", "after_merge(p.returncode, p.stdout)"} {
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

type argoEnv struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom struct {
		SecretKeyRef struct {
			Name     string `yaml:"name"`
			Key      string `yaml:"key"`
			Optional bool   `yaml:"optional"`
		} `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

type argoContainer struct {
	Image   string    `yaml:"image"`
	Command []string  `yaml:"command"`
	Args    []string  `yaml:"args"`
	Env     []argoEnv `yaml:"env"`
	EnvFrom []struct {
		SecretRef struct {
			Name     string `yaml:"name"`
			Optional bool   `yaml:"optional"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
}

type argoTemplate struct {
	Name   string `yaml:"name"`
	Inputs struct {
		Parameters []struct {
			Name  string  `yaml:"name"`
			Value *string `yaml:"value"` // nil: the caller must give it
		} `yaml:"parameters"`
	} `yaml:"inputs"`
	Steps     [][]argoStep   `yaml:"steps"`
	Container *argoContainer `yaml:"container"`
	Volumes   []struct {
		Name                  string `yaml:"name"`
		PersistentVolumeClaim struct {
			ClaimName string `yaml:"claimName"`
			ReadOnly  bool   `yaml:"readOnly"`
		} `yaml:"persistentVolumeClaim"`
	} `yaml:"volumes"`
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
	t.Parallel()
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
	t.Parallel()
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

// argoFile reads the WorkflowTemplate: its templates by name, its workflow
// parameters (name -> given a default) and each template's YAML text.
func argoFile(t *testing.T) (map[string]argoTemplate, map[string]bool, map[string]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "argo", "batchlake-workflowtemplate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var wt struct {
		Spec struct {
			Arguments struct {
				Parameters []struct {
					Name  string  `yaml:"name"`
					Value *string `yaml:"value"`
				} `yaml:"parameters"`
			} `yaml:"arguments"`
			Templates []yaml.Node `yaml:"templates"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &wt); err != nil {
		t.Fatal(err)
	}
	tpls, texts, params := map[string]argoTemplate{}, map[string]string{}, map[string]bool{}
	for _, p := range wt.Spec.Arguments.Parameters {
		params[p.Name] = p.Value != nil
	}
	for i := range wt.Spec.Templates {
		var tp argoTemplate
		if err := wt.Spec.Templates[i].Decode(&tp); err != nil {
			t.Fatal(err)
		}
		text, err := yaml.Marshal(&wt.Spec.Templates[i]) // aliases resolved as Argo sees them
		if err != nil {
			t.Fatal(err)
		}
		tpls[tp.Name], texts[tp.Name] = tp, string(text)
	}
	return tpls, params, texts
}

var paramRef = regexp.MustCompile(`\{\{\s*(inputs|workflow)\.parameters\.([A-Za-z0-9_-]+)\s*\}\}`)

// TestArgoRenders checks what Argo resolves when it renders the template:
// every {{inputs.parameters.x}} names an input of its template, every
// {{workflow.parameters.x}} a workflow argument, and every step passes exactly
// the inputs of the template it calls (all those without a default, none it
// does not have).
func TestArgoRenders(t *testing.T) {
	tpls, params, texts := argoFile(t)
	var sc struct {
		Spec struct {
			SecurityContext struct {
				RunAsNonRoot bool `yaml:"runAsNonRoot"`
				RunAsUser    int  `yaml:"runAsUser"`
			} `yaml:"securityContext"`
		} `yaml:"spec"`
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "argo", "batchlake-workflowtemplate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &sc); err != nil {
		t.Fatal(err)
	}
	if !sc.Spec.SecurityContext.RunAsNonRoot || sc.Spec.SecurityContext.RunAsUser == 0 {
		t.Errorf("pods' securityContext %+v: want runAsNonRoot and the image's non-root uid", sc.Spec.SecurityContext)
	}
	if user := imageUser(t); strconv.Itoa(sc.Spec.SecurityContext.RunAsUser) != user {
		t.Errorf("pods run as uid %d, the image's USER is %s", sc.Spec.SecurityContext.RunAsUser, user)
	}
	for _, want := range []string{"image", "input-claim", "input", "lake", "tenant", "prompt-version", "provider", "model", "partitions"} {
		if _, ok := params[want]; !ok {
			t.Errorf("the workflow has no parameter %q", want)
		}
	}
	for name, tp := range tpls {
		inputs := map[string]bool{}
		for _, p := range tp.Inputs.Parameters {
			inputs[p.Name] = true
		}
		for _, m := range paramRef.FindAllStringSubmatch(texts[name], -1) {
			if m[1] == "inputs" && !inputs[m[2]] {
				t.Errorf("template %s uses {{inputs.parameters.%s}} but has no such input", name, m[2])
			}
			if _, ok := params[m[2]]; m[1] == "workflow" && !ok {
				t.Errorf("template %s uses {{workflow.parameters.%s}}: no such workflow parameter", name, m[2])
			}
		}
		for _, g := range tp.Steps {
			for _, s := range g {
				callee, ok := tpls[s.Template]
				if !ok {
					t.Errorf("%s/%s calls template %q, which is not there", name, s.Name, s.Template)
					continue
				}
				given := map[string]bool{}
				for _, a := range s.Arguments.Parameters {
					given[a.Name] = true
				}
				for _, p := range callee.Inputs.Parameters {
					if p.Value == nil && !given[p.Name] {
						t.Errorf("%s/%s does not give %s its input %q", name, s.Name, s.Template, p.Name)
					}
					delete(given, p.Name)
				}
				for n := range given {
					t.Errorf("%s/%s gives %s an input %q it does not have", name, s.Name, s.Template, n)
				}
			}
		}
	}
	// The entrypoint's inputs come from the workflow's arguments.
	for _, p := range tpls["batch"].Inputs.Parameters {
		if _, ok := params[p.Name]; !ok {
			t.Errorf("the entrypoint's input %q is no workflow parameter", p.Name)
		}
	}
}

// providerCommands are the batchlake commands that talk to a provider.
var providerCommands = map[string]bool{"submit": true, "status": true, "collect": true, "cancel": true, "run": true}

// batchlakeCommand is the batchlake sub-command a container runs, "" if none.
func batchlakeCommand(c *argoContainer) string {
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(argv) > 1 && argv[0] == "batchlake" {
		return argv[1]
	}
	if inv := fromText("", strings.Join(argv, " ")); len(inv) > 0 {
		return inv[0].args[0]
	}
	return ""
}

// mib reads a Kubernetes memory quantity (Mi, Gi) in MiB.
func mib(t *testing.T, q string) float64 {
	t.Helper()
	for suffix, f := range map[string]float64{"Mi": 1, "Gi": 1024} {
		if n, ok := strings.CutSuffix(q, suffix); ok {
			v, err := strconv.ParseFloat(n, 64)
			if err == nil {
				return v * f
			}
		}
	}
	t.Fatalf("memory quantity %q: want <n>Mi or <n>Gi", q)
	return 0
}

// TestArgoPods checks each pod the workflow starts: the image is the
// workflow's, the lake's AWS credentials come from the lake's Secret, only the
// provider steps get a provider Secret (their own provider's), the input is a
// read-only PersistentVolumeClaim mounted in the plan pod, and memory requests
// and limits cover the peaks measured in docs/performance.md.
func TestArgoPods(t *testing.T) {
	tpls, _, _ := argoFile(t)
	// The highest peak RSS measured per command at the default settings
	// (docs/performance.md and docs/deploy.md, 1M and 10M records): a limit
	// below it kills the pod.
	peaks := map[string]float64{"plan": 345, "collect": 224, "reconcile": 1068, "retry": 567, "sql": 108}
	// What each step's request must reach: the typical peak.
	typical := map[string]float64{"plan": 300, "collect": 215, "reconcile": 900, "retry": 567}
	cmds := map[string]bool{}
	for name, tp := range tpls {
		c := tp.Container
		if c == nil {
			continue
		}
		t.Run(name, func(t *testing.T) {
			if c.Image != "{{workflow.parameters.image}}" {
				t.Errorf("image %q: want the workflow's parameter image", c.Image)
			}
			req, lim := c.Resources.Requests["memory"], c.Resources.Limits["memory"]
			if req == "" || lim == "" || c.Resources.Requests["cpu"] == "" {
				t.Fatalf("resources %+v: want cpu and memory requests and a memory limit", c.Resources)
			}
			if mib(t, lim) < mib(t, req) {
				t.Errorf("memory limit %s below its request %s", lim, req)
			}
			cmd := batchlakeCommand(c)
			if cmd == "" {
				if len(c.Env) > 0 || len(c.EnvFrom) > 0 {
					t.Errorf("runs no batchlake but gets credentials")
				}
				return
			}
			cmds[cmd] = true
			if p, ok := peaks[cmd]; ok && mib(t, lim) <= p {
				t.Errorf("batchlake %s peaked at %.0f MiB; the memory limit is %s", cmd, p, lim)
			}
			if p, ok := typical[cmd]; ok && mib(t, req) < p {
				t.Errorf("batchlake %s needs about %.0f MiB; the memory request is %s", cmd, p, req)
			}
			keys := map[string]bool{}
			for _, e := range c.Env {
				if r := e.ValueFrom.SecretKeyRef; r.Name != "" {
					if r.Name != "batchlake-lake" || r.Key != e.Name {
						t.Errorf("env %s from secret %s key %s: want the lake's Secret batchlake-lake, key %s", e.Name, r.Name, r.Key, e.Name)
					}
					keys[e.Name] = true
				}
			}
			for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
				if !keys[k] {
					t.Errorf("no %s from the lake's Secret: batchlake %s cannot reach an s3:// lake", k, cmd)
				}
			}
			var secrets []string
			for _, ef := range c.EnvFrom {
				secrets = append(secrets, ef.SecretRef.Name)
			}
			want := []string(nil)
			if providerCommands[cmd] {
				want = []string{"batchlake-provider-{{inputs.parameters.provider}}"}
			}
			if strings.Join(secrets, ",") != strings.Join(want, ",") {
				t.Errorf("batchlake %s gets secrets %q; want %q (a provider's keys for the steps that talk to it only)", cmd, secrets, want)
			}
			scratch := false
			for _, m := range c.VolumeMounts {
				scratch = scratch || (m.Name == "scratch" && m.MountPath == "/tmp")
			}
			if !scratch {
				t.Error("no scratch volume at /tmp (DuckDB's spills, the merge's outputs)")
			}
		})
	}
	for _, c := range []string{"plan", "submit", "status", "collect", "reconcile", "retry", "sql"} {
		if !cmds[c] {
			t.Errorf("no pod runs batchlake %s", c)
		}
	}
	// The input: a read-only claim mounted where plan's --input points.
	plan := tpls["plan"]
	if len(plan.Volumes) != 1 || plan.Volumes[0].PersistentVolumeClaim.ClaimName != "{{inputs.parameters.input-claim}}" || !plan.Volumes[0].PersistentVolumeClaim.ReadOnly {
		t.Fatalf("plan's volumes %+v: want the read-only claim input-claim", plan.Volumes)
	}
	mount := ""
	for _, m := range plan.Container.VolumeMounts {
		if m.Name == plan.Volumes[0].Name && m.ReadOnly {
			mount = m.MountPath
		}
	}
	argv := strings.Join(plan.Container.Command, " ")
	if mount == "" || !strings.Contains(argv, "--input "+mount+"/{{inputs.parameters.input}}") {
		t.Errorf("plan reads %q; want --input under the claim's read-only mount %q", argv, mount)
	}
	for _, f := range []string{"--provider {{inputs.parameters.provider}}", "--model {{inputs.parameters.model}}", "--tenant {{inputs.parameters.tenant}}"} {
		if !strings.Contains(argv, f) {
			t.Errorf("plan lacks %q", f)
		}
	}
}

// TestArgoStepExitCodes evaluates every batchlake step's retryStrategy for
// each exit code: 1 (an error) and 75 (not yet) run the step again, 2
// (usage, bad input) never does, nor do 10 and 11, which only the merge's
// shell turns into outcomes (TestArgoExitCodePaths).
func TestArgoStepExitCodes(t *testing.T) {
	tpls, _, _ := argoFile(t)
	for name, tp := range tpls {
		if tp.Container == nil || batchlakeCommand(tp.Container) == "" {
			continue
		}
		if tp.RetryStrategy == nil || tp.RetryStrategy.Expression == "" {
			t.Errorf("%s: no retryStrategy expression", name)
			continue
		}
		for _, c := range []struct {
			code  int
			retry bool
		}{{1, true}, {2, false}, {10, false}, {11, false}, {75, true}} {
			expr := strings.ReplaceAll(tp.RetryStrategy.Expression, "asInt(lastRetry.exitCode)", strconv.Itoa(c.code))
			if got := evalWhen(t, expr); got != c.retry {
				t.Errorf("%s exits %d: retried %v, want %v (%s)", name, c.code, got, c.retry, tp.RetryStrategy.Expression)
			}
		}
	}
}

// dagFunctions is python that compiles the DAG file's top-level names listed
// in argv[2] (comma-separated) from its syntax tree alone, without Airflow,
// into ns, with AirflowFailException standing in for Airflow's.
const dagFunctions = `
import ast, json, os, subprocess, sys
tree = ast.parse(open(sys.argv[1]).read(), sys.argv[1])
want = set(sys.argv[2].split(","))
def named(n):
    if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
        return n.name
    if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
        return n.targets[0].id
body = [n for n in tree.body if named(n) in want]
class AirflowFailException(Exception):
    pass
ns = {"json": json, "os": os, "subprocess": subprocess, "AirflowFailException": AirflowFailException}
exec(compile(ast.Module(body=body, type_ignores=[]), sys.argv[1], "exec"), ns)
if want - set(ns):
    sys.exit(sys.argv[1] + " lacks " + ", ".join(sorted(want - set(ns))))
`

func runPython(t *testing.T, script string, stdin any, args ...string) []byte {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: the DAG's functions are not run")
	}
	in, _ := json.Marshal(stdin)
	cmd := exec.Command(py, append([]string{"-B", "-c", script}, args...)...)
	cmd.Stdin = strings.NewReader(string(in))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v: %s", err, stderr.String())
	}
	return out
}

// TestAirflowStepExitCodes runs the DAG's wrapper, batchlake(), over a stub
// batchlake for every exit code, as a task and as a sensor: 0 returns the
// JSON, 75 pokes again (sensor) or raises a retried error (task), 2 raises
// AirflowFailException (failed without a retry, whatever the task's
// retries), anything else a retried error. It also checks that each task
// running batchlake has retries, and the environment each process gets.
func TestAirflowStepExitCodes(t *testing.T) {
	t.Parallel()
	dag := filepath.Join("..", "..", "deploy", "airflow", "batchlake_dag.py")
	stubDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(stubDir, "batchlake"), []byte("#!/bin/sh\nenv | cut -d= -f1 > \"$STUB_ENV\"\nprintf '{\"args\": \"%s\"}' \"$*\"\nexit \"$STUB_CODE\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := dagFunctions + `
out = []
os.environ["PATH"] = sys.argv[3] + os.pathsep + os.environ["PATH"]
for c in json.load(sys.stdin):
    os.environ.update(c["env"])
    r = {}
    try:
        r["returned"] = ns["batchlake"](c["args"], provider=c["provider"], sensor=c["sensor"])
    except Exception as e:
        r["raised"] = type(e).__name__
    r["env"] = open(os.environ["STUB_ENV"]).read().split()
    out.append(r)
# Every task or sensor that runs batchlake() has retries: the errors it raises
# are retried, all but AirflowFailException.
for fn in ast.walk(tree):
    tasks = [d for d in getattr(fn, "decorator_list", []) if isinstance(d, ast.Call) and "task" in ast.unparse(d.func).split(".")]
    if tasks and any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "batchlake" for n in ast.walk(fn)):
        kw = {k.arg: k.value for d in fn.decorator_list if isinstance(d, ast.Call) for k in d.keywords}
        if not (isinstance(kw.get("retries"), ast.Constant) and kw["retries"].value > 0):
            out.append({"no_retries": fn.name})
print(json.dumps(out))
`
	type pyCase struct {
		Args     []string          `json:"args"`
		Provider string            `json:"provider"`
		Sensor   bool              `json:"sensor"`
		Env      map[string]string `json:"env"`
	}
	type want struct {
		returned any
		raised   string
	}
	envFile := filepath.Join(t.TempDir(), "env")
	keys := map[string]string{"OPENAI_API_KEY": "openai", "ANTHROPIC_API_KEY": "anthropic", "GEMINI_API_KEY": "gemini", "BATCHLAKE_BEDROCK_ROLE_ARN": "bedrock"}
	var cases []pyCase
	var wants []want
	var names []string
	for _, code := range []int{0, 1, 2, 10, 11, 75} {
		for _, sensor := range []bool{false, true} {
			w := want{raised: "RuntimeError"} // 1, and 10 and 11 outside the merge
			switch {
			case code == 0:
				w = want{returned: map[string]any{"args": "status --job j"}}
			case code == 2:
				w = want{raised: "AirflowFailException"}
			case code == 75 && sensor:
				w = want{returned: false}
			case code == 75:
				w = want{raised: "NotYet"}
			}
			for _, provider := range []string{"", "openai", "anthropic", "gemini", "bedrock", "sim"} {
				env := map[string]string{"STUB_ENV": envFile, "STUB_CODE": strconv.Itoa(code), "AWS_ACCESS_KEY_ID": "x"}
				for k := range keys {
					env[k] = "secret"
				}
				cases = append(cases, pyCase{[]string{"status", "--job", "j"}, provider, sensor, env})
				wants = append(wants, w)
				names = append(names, fmt.Sprintf("exit %d sensor %v provider %q", code, sensor, provider))
			}
		}
	}
	raw := runPython(t, script, cases, dag, "PROVIDER_ENV,step_env,step_outcome,NotYet,batchlake", stubDir)
	var got []struct {
		Returned  any      `json:"returned"`
		Raised    string   `json:"raised"`
		Env       []string `json:"env"`
		NoRetries string   `json:"no_retries"`
	}
	if err := json.Unmarshal(raw, &got); err != nil || len(got) < len(cases) {
		t.Fatalf("python printed %s (%v)", raw, err)
	}
	for _, g := range got[len(cases):] {
		t.Errorf("%s runs batchlake without retries: its retried errors would fail it at once", g.NoRetries)
	}
	for i, c := range cases {
		t.Run(names[i], func(t *testing.T) {
			g := got[i]
			if g.Raised != wants[i].raised || !reflect.DeepEqual(g.Returned, wants[i].returned) {
				t.Errorf("returned %v raised %q; want returned %v raised %q", g.Returned, g.Raised, wants[i].returned, wants[i].raised)
			}
			seen := map[string]bool{}
			for _, k := range g.Env {
				seen[k] = true
			}
			if !seen["AWS_ACCESS_KEY_ID"] {
				t.Error("the lake's AWS credentials were taken away")
			}
			for k, p := range keys {
				if seen[k] != (p == c.Provider) {
					t.Errorf("provider %q: batchlake sees %s %v", c.Provider, k, seen[k])
				}
			}
		})
	}
}

// TestAirflowProviderEnv checks the DAG's PROVIDER_ENV against the binary's
// help: every variable a provider's steps read (submit --help) is passed to
// that provider's steps, and every provider batchlake knows is there.
func TestAirflowProviderEnv(t *testing.T) {
	t.Parallel()
	dag := filepath.Join("..", "..", "deploy", "airflow", "batchlake_dag.py")
	raw := runPython(t, dagFunctions+"print(json.dumps(ns['PROVIDER_ENV']))", nil, dag, "PROVIDER_ENV")
	var env map[string][]string
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	root := newRoot(context.Background(), &globals{stdout: io.Discard}, io.Discard)
	sub, _, err := root.Find([]string{"submit"})
	if err != nil {
		t.Fatal(err)
	}
	help := sub.Flags().FlagUsages()
	want := map[string][]string{}
	for _, m := range regexp.MustCompile(`\b([a-z]+) \(([A-Z][A-Z0-9_]*(?:, [A-Z][A-Z0-9_]*)*)\)`).FindAllStringSubmatch(help, -1) {
		want[m[1]] = append(want[m[1]], strings.Split(m[2], ", ")...)
	}
	for _, m := range regexp.MustCompile(`env (BATCHLAKE_BEDROCK_[A-Z_]+)`).FindAllStringSubmatch(help, -1) {
		want["bedrock"] = append(want["bedrock"], m[1])
	}
	for _, p := range []string{"openai", "anthropic", "gemini", "bedrock"} {
		if len(want[p]) == 0 {
			t.Fatalf("submit --help names no variable of %s: %s", p, help)
		}
	}
	for _, p := range []string{"sim", "openai", "anthropic", "gemini", "bedrock"} {
		have, ok := env[p]
		if !ok {
			t.Errorf("PROVIDER_ENV has no %s", p)
		}
		for _, v := range want[p] {
			if !slices.Contains(have, v) {
				t.Errorf("PROVIDER_ENV[%s] lacks %s (submit --help)", p, v)
			}
		}
	}
}

// TestAirflowMissingParams runs the DAG's check of a run's params: a run
// without a lake, or a new job without its input, tenant or prompt version,
// fails in its first task instead of planning into ./lake on the worker.
func TestAirflowMissingParams(t *testing.T) {
	t.Parallel()
	dag := filepath.Join("..", "..", "deploy", "airflow", "batchlake_dag.py")
	full := map[string]any{"lake": "s3://b/lake", "input": "/data/in.jsonl", "tenant": "acme", "prompt_version": "v1", "job": ""}
	with := func(k string, v any) map[string]any {
		m := maps.Clone(full)
		m[k] = v
		return m
	}
	cases := []struct {
		name   string
		params map[string]any
		want   []string
	}{
		{"a new job, all given", full, []string{}},
		{"no lake", with("lake", ""), []string{"lake"}},
		{"no input", with("input", ""), []string{"input"}},
		{"no tenant", with("tenant", ""), []string{"tenant"}},
		{"no prompt version", with("prompt_version", ""), []string{"prompt_version"}},
		{"a planned job needs only the lake", map[string]any{"job": "ab12", "lake": "s3://b/lake", "input": ""}, []string{}},
		{"a planned job without a lake", map[string]any{"job": "ab12", "lake": ""}, []string{"lake"}},
	}
	var in []map[string]any
	for _, c := range cases {
		in = append(in, c.params)
	}
	raw := runPython(t, dagFunctions+"print(json.dumps([ns['missing_params'](p) for p in json.load(sys.stdin)]))", in, dag, "missing_params")
	var got [][]string
	if err := json.Unmarshal(raw, &got); err != nil || len(got) != len(cases) {
		t.Fatalf("python printed %s (%v)", raw, err)
	}
	for i, c := range cases {
		if !slices.Equal(got[i], c.want) {
			t.Errorf("%s: missing %q, want %q", c.name, got[i], c.want)
		}
	}
}

// TestAirflowImports imports the DAG file under stand-ins for Airflow 3's
// module layout (airflow.sdk, the standard provider) and 2.x's (no
// airflow.sdk: airflow.decorators, airflow.models.param, airflow.operators),
// and checks which modules it took its names from and the DAG's params.
func TestAirflowImports(t *testing.T) {
	t.Parallel()
	dag, err := filepath.Abs(filepath.Join("..", "..", "deploy", "airflow", "batchlake_dag.py"))
	if err != nil {
		t.Fatal(err)
	}
	common := map[string]string{
		"pendulum.py":           "def datetime(*a, **k): return a\ndef duration(**k): return k\n",
		"airflow/__init__.py":   "",
		"airflow/exceptions.py": "class AirflowFailException(Exception): pass\nclass AirflowSkipException(Exception): pass\n",
	}
	// dag() records its params and does not build the DAG: task and the
	// operators are only used inside it.
	stub := "DAGS = []\nclass Param:\n    def __init__(self, default=None, **k): self.default = default\n" +
		"def dag(**k):\n    DAGS.append(k)\n    return lambda f: (lambda: None)\ntask = object()\n"
	layouts := map[string]map[string]string{
		"airflow3": {
			"airflow/sdk/__init__.py":                                stub,
			"airflow/providers/__init__.py":                          "",
			"airflow/providers/standard/__init__.py":                 "",
			"airflow/providers/standard/operators/__init__.py":       "",
			"airflow/providers/standard/operators/trigger_dagrun.py": "class TriggerDagRunOperator: pass\n",
		},
		"airflow2": {
			"airflow/decorators.py":               stub,
			"airflow/models/__init__.py":          "",
			"airflow/models/param.py":             "class Param:\n    def __init__(self, default=None, **k): self.default = default\n",
			"airflow/operators/__init__.py":       "",
			"airflow/operators/trigger_dagrun.py": "class TriggerDagRunOperator: pass\n",
		},
	}
	want := map[string][3]string{
		"airflow3": {"airflow.sdk", "airflow.sdk", "airflow.providers.standard.operators.trigger_dagrun"},
		"airflow2": {"airflow.decorators", "airflow.models.param", "airflow.operators.trigger_dagrun"},
	}
	script := `
import importlib.util, json, sys
sys.path.insert(0, sys.argv[2])
spec = importlib.util.spec_from_file_location("batchlake_dag", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
dags = sys.modules[mod.dag.__module__].DAGS
print(json.dumps({"modules": [mod.dag.__module__, mod.Param.__module__, mod.TriggerDagRunOperator.__module__],
                  "params": sorted(dags[0]["params"]) if dags else []}))
`
	for name, files := range layouts {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for _, fs := range []map[string]string{common, files} {
				for p, body := range fs {
					if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			var got struct {
				Modules []string `json:"modules"`
				Params  []string `json:"params"`
			}
			if err := json.Unmarshal(runPython(t, script, nil, dag, dir), &got); err != nil {
				t.Fatal(err)
			}
			w := want[name]
			if !slices.Equal(got.Modules, w[:]) {
				t.Errorf("dag, Param and TriggerDagRunOperator from %q; want %q", got.Modules, w)
			}
			for _, p := range []string{"lake", "input", "tenant", "prompt_version", "provider", "model", "partitions", "job"} {
				if !slices.Contains(got.Params, p) {
					t.Errorf("the DAG has no param %q (params %q)", p, got.Params)
				}
			}
		})
	}
}

// dockerfile reads the Dockerfile's instructions (continuation lines joined)
// with its ARG defaults substituted, split into build stages.
func dockerfile(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	args := map[string]string{}
	var stages [][]string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if a, ok := strings.CutPrefix(line, "ARG "); ok {
			if k, v, ok := strings.Cut(a, "="); ok {
				args[k] = v
			}
		}
		line = regexp.MustCompile(`\$\{([A-Z_]+)\}`).ReplaceAllStringFunc(line, func(s string) string { return args[s[2:len(s)-1]] })
		if strings.HasPrefix(line, "FROM ") {
			stages = append(stages, nil)
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], line)
		}
	}
	return stages
}

// imageUser is the uid of the Dockerfile's run stage USER.
func imageUser(t *testing.T) string {
	t.Helper()
	stages := dockerfile(t)
	for _, l := range stages[len(stages)-1] {
		if u, ok := strings.CutPrefix(l, "USER "); ok {
			uid, _, _ := strings.Cut(strings.TrimSpace(u), ":")
			return uid
		}
	}
	t.Fatal("the Dockerfile's run stage has no USER")
	return ""
}

// TestDockerfile checks the Dockerfile's facts without a Docker engine: a
// cgo build stage on the golang image of go.mod's Go version with the
// Makefile's build tags, and a glibc run stage with CA certificates, a
// non-root user and the binary alone; and that .dockerignore keeps every
// file the build needs.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	stages := dockerfile(t)
	if len(stages) < 2 {
		t.Fatalf("%d stages: want a build stage and a run stage", len(stages))
	}
	build, run := stages[0], stages[len(stages)-1]
	gomod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	gover := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(gomod))
	if gover == nil {
		t.Fatal("go.mod has no go line")
	}
	from := strings.Fields(build[0])
	if len(from) != 4 || !strings.HasPrefix(from[1], "golang:"+gover[1]+"-") || !strings.EqualFold(from[2], "AS") {
		t.Errorf("build stage %q: want FROM golang:%s-<debian release> AS <name> (go.mod's Go)", build[0], gover[1])
	}
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	tags := regexp.MustCompile(`(?m)^TAGS\s*:?=\s*(\S+)`).FindStringSubmatch(string(makefile))
	if tags == nil {
		t.Fatal("the Makefile has no TAGS")
	}
	var goBuild string
	for _, l := range build {
		if strings.Contains(l, "go build") {
			goBuild = l
		}
	}
	for _, want := range []string{"CGO_ENABLED=1", "-tags " + tags[1] + " ", "./cmd/batchlake"} {
		if !strings.Contains(goBuild, want) {
			t.Errorf("the build stage's go build %q lacks %q (the Makefile builds with -tags %s)", goBuild, want, tags[1])
		}
	}
	base := strings.Fields(run[0])[1]
	if !regexp.MustCompile(`^(debian:[a-z]+-slim|gcr\.io/distroless/cc)`).MatchString(base) {
		t.Errorf("run stage on %q: want debian:<release>-slim or distroless/cc (DuckDB needs glibc and libstdc++)", base)
	}
	if rel := from[1][strings.LastIndex(from[1], "-")+1:]; strings.HasPrefix(base, "debian:") && base != "debian:"+rel+"-slim" {
		t.Errorf("built on Debian %s, run on %s: the binary needs the glibc it was linked against", rel, base)
	}
	var user, entry string
	var copies []string
	for _, l := range run[1:] {
		switch f := strings.Fields(l); f[0] {
		case "USER":
			user = f[1]
		case "ENTRYPOINT":
			entry = l
		case "COPY", "ADD":
			copies = append(copies, l)
		}
	}
	if u, _, _ := strings.Cut(user, ":"); u == "" || u == "root" || u == "0" {
		t.Errorf("run stage USER %q: want a non-root user", user)
	}
	if len(copies) != 1 || !regexp.MustCompile(`^COPY --from=\S+ \S+/batchlake /usr/local/bin/batchlake$`).MatchString(copies[0]) {
		t.Errorf("run stage copies %q: want the binary and nothing else", copies)
	}
	if !strings.Contains(entry, `"batchlake"`) {
		t.Errorf("ENTRYPOINT %q: want batchlake", entry)
	}
	if !strings.Contains(strings.Join(run, "\n"), "ca-certificates") {
		t.Error("the run stage installs no CA certificates: TLS to the providers and object stores fails")
	}
	if !regexp.MustCompile(`(?m)^image:.*\n\tdocker build `).Match(makefile) {
		t.Error("the Makefile has no image target running docker build")
	}
	checkDockerignore(t)
}

// checkDockerignore fails when .dockerignore excludes go.mod, go.sum or any
// Go, cgo or embedded file of a package the binary is built from.
func checkDockerignore(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, strings.Trim(l, "/"))
		}
	}
	ignored := func(rel string) bool {
		parts := strings.Split(rel, "/")
		for _, p := range patterns {
			for i := range parts {
				prefix := strings.Join(parts[:i+1], "/")
				if ok, _ := filepath.Match(p, prefix); ok {
					return true
				}
				if rest, ok := strings.CutPrefix(p, "**/"); ok {
					if ok, _ := filepath.Match(rest, parts[i]); ok {
						return true
					}
				}
			}
		}
		return false
	}
	for _, p := range []string{".git", "bin", "testdata"} {
		if !ignored(p) {
			t.Errorf(".dockerignore keeps %s in the build context", p)
		}
	}
	rootDir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-tags", "duckdb_arrow", "-deps",
		"-f", `{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .CgoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}`, "../../cmd/batchlake").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	files := []string{"go.mod", "go.sum"}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		rel, err := filepath.Rel(rootDir, f[0])
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // the standard library and module dependencies
		}
		for _, name := range f[1:] {
			files = append(files, filepath.ToSlash(filepath.Join(rel, name)))
		}
	}
	if len(files) < 10 {
		t.Fatalf("go list found only %q", files)
	}
	for _, f := range files {
		if ignored(f) {
			t.Errorf(".dockerignore excludes %s, which the build needs", f)
		}
	}
}

// TestDockerImage builds the image and runs it where a Docker engine answers.
func TestDockerImage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building the container image takes minutes (the full run builds it where Docker is)")
	}
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Skipf("no Docker engine (docker info: %v: %s): the image is not built; TestDockerfile checks the Dockerfile", err, strings.TrimSpace(string(out)))
	}
	tag := "batchlake-test:" + strconv.Itoa(os.Getpid())
	build := exec.Command("docker", "build", "-t", tag, ".")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", tag).Run() })
	out, err := exec.Command("docker", "run", "--rm", tag, "--version").Output()
	if err != nil {
		t.Fatalf("docker run %s --version: %v", tag, err)
	}
	var v versionInfo
	if err := json.Unmarshal(out, &v); err != nil || len(v.LakeFormats) == 0 {
		t.Fatalf("--version printed %s (%v)", out, err)
	}
	// A whole job on the simulator in the image, as its non-root user: plan,
	// ingest and DuckDB's reconcile (glibc, libstdc++), then a query.
	const job = `cd /tmp && printf '%s\n' '{"custom_id":"r1","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}}' > in.jsonl &&
batchlake run --lake lake --provider sim --input in.jsonl --tenant t --prompt-version v1 --poll 50ms --progress never >/dev/null &&
batchlake sql --lake lake --format json "SELECT count(*) AS answered FROM records WHERE final_state = 'succeeded'"`
	out, err = exec.Command("docker", "run", "--rm", "--entrypoint", "sh", tag, "-c", job).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"answered": 1`) {
		t.Fatalf("a job on the simulator in the image: %v\n%s", err, out)
	}
	out, err = exec.Command("docker", "run", "--rm", "--entrypoint", "id", tag, "-u").Output()
	if err != nil || strings.TrimSpace(string(out)) == "0" {
		t.Fatalf("the image runs as uid %q (%v): want a non-root user", out, err)
	}
}
