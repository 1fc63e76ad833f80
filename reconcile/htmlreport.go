package reconcile

import (
	"bytes"
	_ "embed"
	"html/template"
	"io"
	"strings"

	"golang.org/x/net/html"
)

// The page is one static file: inline CSS, no script, no external request
// (its Content-Security-Policy forbids any), so it reads offline and can be
// archived beside the report. Every number carries a stable id for tests.
//
//go:embed report.html
var reportHTML string

// RenderHTML writes the page of s. It shows only values of s, so a page and
// the JSON of the same summary always agree.
func RenderHTML(w io.Writer, s *JobSummary) error {
	var maxBin int64
	for _, b := range s.Attempts {
		maxBin = max(maxBin, b.Records)
	}
	t, err := template.New("report").Funcs(template.FuncMap{
		"short": func(k string) string {
			if len(k) > 12 {
				return k[:12]
			}
			return k
		},
		"pct": func(n int64) int64 {
			if maxBin == 0 {
				return 0
			}
			return n * 100 / maxBin
		},
	}).Parse(reportHTML)
	if err != nil {
		return err
	}
	return t.Execute(w, s)
}

// PageNumbers reads back what a report page shows, element id -> text, so a
// check (ours, or an orchestrator's) can compare the page with the JSON.
func PageNumbers(page []byte) (map[string]string, error) {
	root, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		return nil, err
	}
	ids := map[string]string{}
	var text func(*html.Node) string
	text = func(n *html.Node) string {
		if n.Type == html.TextNode {
			return n.Data
		}
		var b strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			b.WriteString(text(c))
		}
		return b.String()
	}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			for _, a := range n.Attr {
				if a.Key == "id" {
					ids[a.Val] = strings.TrimSpace(text(n))
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	return ids, nil
}
