package reconcile

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math/big"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/html"
)

// The page is one static file: inline CSS and inline SVG charts, no script,
// no external request (its Content-Security-Policy forbids any), so it reads
// offline and can be archived beside the report. Every number carries a
// stable id for tests; an amount of money shows rounded for people and
// keeps its exact value in a <data value> element.
//
//go:embed report.html
var reportHTML string

// Chart is one SVG bar chart of the page, laid out in Go so the template
// only places numbers (no script draws anything).
type Chart struct {
	ID            string
	Width, Height int
	Bars          []Bar
	// Columns: a time series drawn as vertical columns, else horizontal bars.
	Columns bool
	// Axis is the baseline of a column chart (y of the columns' bottom).
	Axis int
}

// Bar is one bar of a chart and its labels.
type Bar struct {
	Label, Value, Exact string
	Lines               int64
	X, Y, W, H          int
	LabelX, LabelY      int
	ValueX, ValueY      int
	Fill                string
	// Rotate turns a column's label (rotate(-40 x y)), "" for none.
	Rotate string
}

// palette colours bars in order; the categories have fixed colours so the
// same category looks the same on every page.
var (
	palette         = []string{"#4a7bd0", "#e0883a", "#4aa07a", "#b45ab4", "#c9b12c", "#6a6a6a", "#3ab0c9", "#c94a4a"}
	categoryColours = map[string]string{
		"first_success": "#4aa07a", "duplicate_submission": "#c94a4a", "quality_failure": "#e0883a",
		"retryable_failure": "#c9b12c", "permanent_failure": "#b45ab4", "manual": "#6a6a6a", "unattributed": "#3ab0c9",
	}
)

// barChart lays out lines as horizontal bars, longest for the largest cost.
func barChart(id string, lines []CostLine, colour func(i int, key string) string) Chart {
	const row, barH, labelW, maxW = 26, 18, 210, 400
	c := Chart{ID: id, Width: labelW + maxW + 150, Height: row*len(lines) + 8}
	top := maxCost(lines)
	for i, l := range lines {
		y := 4 + i*row
		w := scaled(l.CostUSD, top, maxW)
		c.Bars = append(c.Bars, Bar{Label: l.Key, Value: HumanUSD(string(l.CostUSD)), Exact: string(l.CostUSD), Lines: l.Lines,
			X: labelW, Y: y, W: w, H: barH, LabelX: labelW - 8, LabelY: y + 14, ValueX: labelW + w + 6, ValueY: y + 14, Fill: colour(i, l.Key)})
	}
	return c
}

// columnChart lays out lines (one per day, in order) as vertical columns.
func columnChart(id string, lines []CostLine) Chart {
	const plotH, top, labelH, left = 180, 20, 70, 70
	colW := 64
	if n := len(lines); n > 0 && 700/n < colW {
		colW = max(700/n, 3)
	}
	c := Chart{ID: id, Columns: true, Width: left + colW*len(lines) + 80, Height: top + plotH + labelH, Axis: top + plotH}
	maxC := maxCost(lines)
	every := 1 + len(lines)/24 // about 24 date labels at most
	for i, l := range lines {
		h := scaled(l.CostUSD, maxC, plotH)
		x := left + i*colW
		b := Bar{Label: l.Key, Value: HumanUSD(string(l.CostUSD)), Exact: string(l.CostUSD), Lines: l.Lines,
			X: x + 1, Y: top + plotH - h, W: max(colW-2, 1), H: h, Fill: palette[0], LabelX: x + colW/2, LabelY: top + plotH + 14,
			ValueX: x + colW/2, ValueY: top + plotH - h - 4}
		if i%every != 0 {
			b.Label = ""
		}
		if len(lines) > 12 {
			b.Value = "" // too narrow: the table below and the tooltip have it
		}
		b.Rotate = fmt.Sprintf("rotate(-40 %d %d)", b.LabelX, b.LabelY)
		c.Bars = append(c.Bars, b)
	}
	return c
}

func maxCost(lines []CostLine) *big.Rat {
	top := new(big.Rat)
	for _, l := range lines {
		if v, ok := new(big.Rat).SetString(string(l.CostUSD)); ok && v.Cmp(top) > 0 {
			top = v
		}
	}
	return top
}

// scaled is v/top of full pixels; a cost above 0 is at least 1 pixel, so
// it never disappears beside a large one.
func scaled(v json.Number, top *big.Rat, full int) int {
	x, ok := new(big.Rat).SetString(string(v))
	if !ok || x.Sign() <= 0 || top.Sign() <= 0 {
		return 0
	}
	f, _ := new(big.Rat).Quo(x, top).Float64()
	return max(int(f*float64(full)+0.5), 1)
}

// HumanUSD renders an exact decimal amount for people: a dollar sign,
// thousands separators, cents from $1 up, and below $1 two significant
// digits (at most 8 decimals: "$0.000032" for 0.0000315). The page keeps
// the exact value beside it.
func HumanUSD(s string) string {
	v, ok := new(big.Rat).SetString(s)
	if !ok {
		return s
	}
	sign := ""
	if v.Sign() < 0 {
		sign = "-"
		v.Neg(v)
	}
	if v.Sign() == 0 {
		return "$0.00"
	}
	decimals := 2
	if v.Cmp(big.NewRat(1, 1)) < 0 {
		// The first significant digit's place, plus one more.
		decimals = 8
		for p, x := 1, new(big.Rat).Set(v); p < 8; p++ {
			if x.Mul(x, big.NewRat(10, 1)); x.Cmp(big.NewRat(1, 1)) >= 0 {
				decimals = max(p+1, 2)
				break
			}
		}
	}
	f := v.FloatString(decimals)
	if strings.Trim(f, "0.") == "" {
		if sign != "" {
			return "> -$0.00000001"
		}
		return "< $0.00000001"
	}
	intPart, frac, _ := strings.Cut(f, ".")
	return sign + "$" + groupString(intPart) + "." + frac
}

// groupDigits writes n with thousands separators.
func groupDigits(n int64) string {
	if n < 0 {
		return "-" + groupString(strconv.FormatInt(-n, 10))
	}
	return groupString(strconv.FormatInt(n, 10))
}

func groupString(d string) string {
	if len(d) <= 3 {
		return d
	}
	var b strings.Builder
	pre := len(d) % 3
	if pre > 0 {
		b.WriteString(d[:pre])
	}
	for i := pre; i < len(d); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(d[i : i+3])
	}
	return b.String()
}

// humanDuration renders a turnaround: "45s", "12m 05s", "3h 02m", "2d 04h".
func humanDuration(sec *int64) string {
	if sec == nil {
		return "–"
	}
	d := time.Duration(*sec) * time.Second
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", *sec)
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd %02dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

// formatTime renders a time or *time.Time in UTC ("–" for none).
func formatTime(t any, layout string) string {
	switch v := t.(type) {
	case *time.Time:
		if v == nil {
			return "–"
		}
		return v.UTC().Format(layout)
	case time.Time:
		return v.UTC().Format(layout)
	}
	return ""
}

// page is what the template renders: the summary and its charts.
type page struct {
	*JobSummary
	Title                                           string
	ByCategory, ByModel, ByAttempt, ByTenant, ByDay Chart
}

// RenderHTML writes the page of s. It shows only values of s, so a page and
// the JSON of the same summary always agree.
func RenderHTML(w io.Writer, s *JobSummary) error {
	var maxBin int64
	for _, b := range s.Attempts {
		maxBin = max(maxBin, b.Records)
	}
	p := page{JobSummary: s,
		ByCategory: barChart("chart-category", s.CostCategory, func(i int, k string) string {
			if c, ok := categoryColours[k]; ok {
				return c
			}
			return palette[i%len(palette)]
		}),
		ByModel:   barChart("chart-model", s.CostModel, func(i int, _ string) string { return palette[i%len(palette)] }),
		ByAttempt: barChart("chart-attempt", s.CostAttempt, func(i int, _ string) string { return palette[i%len(palette)] }),
		ByTenant:  barChart("chart-tenant", s.CostTenant, func(i int, _ string) string { return palette[i%len(palette)] }),
		ByDay:     columnChart("chart-day", s.CostDay),
	}
	for i := range p.ByAttempt.Bars {
		if p.ByAttempt.Bars[i].Label == "0" {
			p.ByAttempt.Bars[i].Label = "no record (unknown ids)" // attempt 0: lines of no record
		}
	}
	switch {
	case s.Scope.Job != "":
		p.Title = "job " + s.Scope.Job[:min(12, len(s.Scope.Job))]
	case s.Scope.Tenant != "":
		p.Title = "tenant " + s.Scope.Tenant
	default:
		p.Title = "the whole lake"
	}
	if !s.Scope.Since.IsZero() {
		p.Title += " since " + s.Scope.Since.UTC().Format("2006-01-02")
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
		"usd":    func(n json.Number) string { return HumanUSD(string(n)) },
		"int":    groupDigits,
		"dur":    humanDuration,
		"join":   func(v []string) string { return strings.Join(v, ", ") },
		"count":  func(v []string) int { return len(v) },
		"when":   func(t any) string { return formatTime(t, "2006-01-02 15:04 UTC") },
		"minute": func(t any) string { return formatTime(t, "2006-01-02 15:04") },
	}).Parse(reportHTML)
	if err != nil {
		return err
	}
	return t.Execute(w, p)
}

// PageNumbers reads back what a report page shows, element id -> text, so a
// check (ours, or an orchestrator's) can compare the page with the JSON. An
// element with a value attribute (<data value>: an exact amount beside its
// rounded text) also gives id+"@value" -> the value.
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
			id, value, hasValue := "", "", false
			for _, a := range n.Attr {
				switch a.Key {
				case "id":
					id = a.Val
				case "value":
					value, hasValue = a.Val, true
				}
			}
			if id != "" {
				ids[id] = strings.Join(strings.Fields(text(n)), " ")
				if hasValue {
					ids[id+"@value"] = value
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
