package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/batchlake/batchlake/"

// pkg is what go list says of one package of the module, with the module's
// prefix cut off every path and other modules' packages left out.
type pkg struct {
	Path    string
	Imports []string // outside test files
	Deps    []string // outside test files, transitively
}

// listModule runs go list over the whole module.
func listModule(t *testing.T) map[string]pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the layout test reads the import graph with go list: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-e", "-json", "-tags", "duckdb_arrow", "./...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.String())
	}
	ours := func(paths []string) []string {
		var r []string
		for _, p := range paths {
			if rest, ok := strings.CutPrefix(p, module); ok {
				r = append(r, rest)
			}
		}
		return r
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath                string
			Imports, Deps             []string
			TestImports, XTestImports []string
			Error                     *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list -json: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		path, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok {
			continue
		}
		pkgs[path] = pkg{Path: path, Imports: ours(p.Imports), Deps: ours(p.Deps)}
	}
	return pkgs
}

// under reports whether path is prefix itself or a package below it.
func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

func underAny(path string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return under(path, p) })
}

// fakes are the fake provider servers: test and demo machinery.
var fakes = []string{"internal/fakeopenai", "internal/fakeanthropic", "internal/fakebedrock", "internal/fakegemini"}

// TestNoArrowBetween: the product's packages never depend (transitively,
// outside tests) on the packages named.
func TestNoArrowBetween(t *testing.T) {
	pkgs := listModule(t)
	rules := []struct {
		name      string
		from      []string // the packages checked, and those below them
		forbidden []string
	}{
		{"the product never depends on the test and demo machinery",
			[]string{"errkind", "lake", "ingest", "reconcile", "lifecycle", "providers", "sql"}, []string{"internal"}},
		{"reconcile reads the ledger through lake, never through a provider or the submit protocol",
			[]string{"reconcile"}, []string{"providers", "lifecycle", "cmd"}},
		{"the storage and input layers know nothing above them",
			[]string{"errkind", "lake", "ingest", "sql"}, []string{"providers", "lifecycle", "reconcile", "cmd"}},
		{"adapters and the provider seam know nothing of the protocol that drives them",
			[]string{"providers"}, []string{"lifecycle", "reconcile", "cmd"}},
		{"the submit protocol knows providers only through the seam",
			[]string{"lifecycle"}, []string{"providers/anthropicbatch", "providers/bedrockbatch", "providers/geminibatch", "providers/openaibatch", "reconcile", "cmd"}},
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			checked := 0
			for _, p := range pkgs {
				if !underAny(p.Path, r.from) {
					continue
				}
				checked++
				for _, d := range p.Deps {
					if underAny(d, r.forbidden) {
						t.Errorf("%s depends on %s (%s)", p.Path, d, via(pkgs, p.Path, d))
					}
				}
			}
			if checked == 0 {
				t.Errorf("no package under %v: was one moved? Update the rule and the README's layout section", r.from)
			}
		})
	}
}

// TestFakesReachedOnlyFromTestsAndTheSimulator: outside test files, only
// the simulator imports a fake provider server, and only the CLI (which
// wires it up for --provider sim) imports the simulator.
func TestFakesReachedOnlyFromTestsAndTheSimulator(t *testing.T) {
	pkgs := listModule(t)
	cases := []struct {
		name     string
		imported []string
		allowed  []string
	}{
		{"fake provider servers", fakes, []string{"internal/sim"}},
		// bench/lakegen grows benchmark lakes of simulated jobs, as run does.
		{"the simulator", []string{"internal/sim"}, []string{"cmd/batchlake", "bench/lakegen"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, want := range c.imported {
				if _, ok := pkgs[want]; !ok {
					t.Errorf("no package %s: was it moved? Update this test and the README's layout section", want)
				}
			}
			for _, p := range pkgs {
				if underAny(p.Path, c.imported) || slices.Contains(c.allowed, p.Path) {
					continue
				}
				for _, imp := range p.Imports {
					if underAny(imp, c.imported) {
						t.Errorf("%s imports %s outside its tests; only tests and %s may", p.Path, imp, strings.Join(c.allowed, ", "))
					}
				}
			}
		})
	}
}

// via names one import chain from a package to one of its dependencies, so
// a failure says which import to remove.
func via(pkgs map[string]pkg, from, to string) string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			chain := []string{cur}
			for p := prev[cur]; p != ""; p = prev[p] {
				chain = append([]string{p}, chain...)
			}
			return strings.Join(chain, " → ")
		}
		for _, next := range pkgs[cur].Imports {
			if _, seen := prev[next]; !seen {
				prev[next] = cur
				queue = append(queue, next)
			}
		}
	}
	return fmt.Sprintf("%s → … → %s", from, to)
}
