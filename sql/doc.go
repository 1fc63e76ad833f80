// Package sql holds batchlake's SQL as .sql files, embedded at build time, and
// the shipped price table. Import it under a name that does not clash with
// database/sql (the reconcile package uses lakesql).
//
// Files are text/template templates: the Go side fills in only lake-derived
// file lists and validated predicates, never raw user text.
package sql

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
	"text/template"
)

//go:embed *.sql prices.csv
var files embed.FS

// Prices is the shipped price table (CSV).
func Prices() []byte {
	b, err := files.ReadFile("prices.csv")
	if err != nil {
		panic(err)
	}
	return b
}

// Render executes the named .sql template with data and splits the result
// into statements (on lines that end with ';'). A query that more than one
// file needs is a template defined in a part_*.sql file, which a file includes
// with {{template "name" …}}.
func Render(name string, data any) ([]string, error) {
	src, err := files.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("sql %s: %w", name, err)
	}
	t, err := template.New(name).Option("missingkey=error").Parse(string(src))
	if err == nil {
		t, err = t.ParseFS(files, "part_*.sql")
	}
	if err != nil {
		return nil, fmt.Errorf("sql %s: %w", name, err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("sql %s: %w", name, err)
	}
	return Split(buf.String()), nil
}

// Split cuts a script into statements at lines ending in ';', dropping
// comment-only and empty statements. A comment line never ends a statement,
// whatever its last character: a ';' closing a sentence of a comment inside
// a statement would otherwise cut the statement in two.
func Split(script string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		s := strings.TrimSpace(cur.String())
		cur.Reset()
		if s == "" {
			return
		}
		only := true
		for _, l := range strings.Split(s, "\n") {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "--") {
				only = false
				break
			}
		}
		if !only {
			out = append(out, s)
		}
	}
	for _, l := range strings.SplitAfter(script, "\n") {
		cur.WriteString(l)
		if t := strings.TrimSpace(l); strings.HasSuffix(t, ";") && !strings.HasPrefix(t, "--") {
			flush()
		}
	}
	flush()
	return out
}

// Quote renders s as a SQL string literal.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// List renders paths as a SQL list of string literals.
func List(paths []string) string {
	q := make([]string, len(paths))
	for i, p := range paths {
		q[i] = Quote(p)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
