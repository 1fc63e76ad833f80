package reconcile

import (
	_ "embed"
	"html/template"
	"io"
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
