package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
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
	// Collect fans out over the shards, reconcile over the partitions, and
	// the round branches on the merge's exit code.
	for _, want := range []string{"withParam:", "{{item.shard_id}}", "withSequence:", "{{item}}/{{inputs.parameters.partitions}}",
		"outputs.parameters.code}} == 10", "outputs.parameters.code}} == 11"} {
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
	for _, want := range []string{"BashSensor", "retry_exit_code=75", "shard_ids.map(", ".expand(part=", "returncode == 11", "returncode != 10"} {
		if !strings.Contains(src, want) {
			t.Errorf("DAG lacks %q", want)
		}
	}
}
