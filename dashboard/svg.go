package dashboard

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// Charts are drawn here as inline SVG: no library, no script, readable in
// any browser and in screenshots. Every chart has a <title> and a <desc>
// (its accessible name and description) and colours given as presentation
// attributes, which the Content-Security-Policy allows (style attributes it
// does not). All text is escaped.

// Point is one chart point.
type Point struct {
	X time.Time
	Y float64
}

// Series is one line of a line chart.
type Series struct {
	Name   string
	Color  string
	Dashed bool
	// Step draws a price that holds until the next point.
	Step bool
	// Markers draws a dot at each point (few points only).
	Markers bool
	Points  []Point
}

// LineChart is a time-series chart.
type LineChart struct {
	ID, Title, Desc string
	// Unit labels the y axis values, e.g. "$/h".
	Unit   string
	Series []Series
	// Until extends step series to this time (zero: the last point).
	Until time.Time
	// Limit draws a horizontal reference line (e.g. a budget of 0), when
	// LimitLabel is set.
	Limit      float64
	LimitLabel string
}

const (
	chartW, chartH                = 720, 260
	padL, padR, padTop, padBottom = 64, 16, 36, 32
)

func esc(s string) string { return template.HTMLEscapeString(s) }

func fnum(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// niceMax rounds a maximum up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// axisLabel formats a value for an axis label: $2.5k, $0.35/h, 12 GPUs.
func axisLabel(v float64, unit string) string {
	var s string
	switch {
	case v == 0:
		s = "0"
	case math.Abs(v) >= 1000:
		s = strconv.FormatFloat(v/1000, 'f', -1, 64) + "k"
	case math.Abs(v) >= 10 || v == math.Trunc(v):
		s = strconv.FormatFloat(v, 'f', 0, 64)
	default:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	}
	switch {
	case strings.HasPrefix(unit, "$"):
		s = "$" + s + unit[1:]
	case unit != "":
		s += " " + unit
	}
	return s
}

func svgOpen(b *strings.Builder, id, title, desc string, w, h int) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-labelledby="%s-t %s-d">`,
		w, h, w, h, esc(id), esc(id))
	fmt.Fprintf(b, `<title id="%s-t">%s</title><desc id="%s-d">%s</desc>`, esc(id), esc(title), esc(id), esc(desc))
	fmt.Fprintf(b, `<rect x="0" y="0" width="%d" height="%d" fill="%s"/>`, w, h, palette.Surface)
}

// SVG renders the chart; an empty chart says so in place of lines.
func (c LineChart) SVG() template.HTML {
	var b strings.Builder
	svgOpen(&b, c.ID, c.Title, c.Desc, chartW, chartH)
	var minX, maxX time.Time
	maxY := c.Limit
	n := 0
	for _, s := range c.Series {
		for _, p := range s.Points {
			if n == 0 || p.X.Before(minX) {
				minX = p.X
			}
			if n == 0 || p.X.After(maxX) {
				maxX = p.X
			}
			maxY = max(maxY, p.Y)
			n++
		}
	}
	if !c.Until.IsZero() && c.Until.After(maxX) && n > 0 {
		maxX = c.Until
	}
	x0, x1, y0, y1 := float64(padL), float64(chartW-padR), float64(chartH-padBottom), float64(padTop)
	if n == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="%s" font-size="14">no data recorded</text></svg>`,
			chartW/2, chartH/2, palette.Muted)
		return template.HTML(b.String()) //nolint:gosec // built from escaped parts
	}
	if !maxX.After(minX) {
		minX, maxX = minX.Add(-12*time.Hour), maxX.Add(12*time.Hour)
	}
	top := niceMax(maxY * 1.05)
	xOf := func(t time.Time) float64 {
		return x0 + (x1-x0)*float64(t.Sub(minX))/float64(maxX.Sub(minX))
	}
	yOf := func(v float64) float64 { return y0 - (y0-y1)*v/top }
	// Grid and y labels.
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		y := yOf(v)
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1"/>`, fnum(x0), fnum(y), fnum(x1), fnum(y), palette.Grid)
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="end" font-size="11" fill="%s">%s</text>`, fnum(x0-6), fnum(y+4), palette.Muted, esc(axisLabel(v, c.Unit)))
	}
	// X labels: dates, or times within a day.
	layout := "2006-01-02"
	if maxX.Sub(minX) < 48*time.Hour {
		layout = "01-02 15:04"
	}
	for i := 0; i <= 4; i++ {
		t := minX.Add(time.Duration(float64(maxX.Sub(minX)) * float64(i) / 4))
		anchor := "middle"
		if i == 0 {
			anchor = "start"
		} else if i == 4 {
			anchor = "end"
		}
		fmt.Fprintf(&b, `<text x="%s" y="%d" text-anchor="%s" font-size="11" fill="%s">%s</text>`, fnum(xOf(t)), chartH-10, anchor, palette.Muted, esc(t.UTC().Format(layout)))
	}
	if c.LimitLabel != "" {
		y := yOf(c.Limit)
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5" stroke-dasharray="2 3"/>`, fnum(x0), fnum(y), fnum(x1), fnum(y), palette.Danger)
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="end" font-size="11" fill="%s">%s</text>`, fnum(x1), fnum(y-4), palette.Danger, esc(c.LimitLabel))
	}
	// Lines.
	for _, s := range c.Series {
		if len(s.Points) == 0 {
			continue
		}
		var d strings.Builder
		for i, p := range s.Points {
			x, y := xOf(p.X), yOf(p.Y)
			switch {
			case i == 0:
				fmt.Fprintf(&d, "M%s %s", fnum(x), fnum(y))
			case s.Step:
				fmt.Fprintf(&d, " H%s V%s", fnum(x), fnum(y))
			default:
				fmt.Fprintf(&d, " L%s %s", fnum(x), fnum(y))
			}
		}
		if s.Step && !c.Until.IsZero() {
			fmt.Fprintf(&d, " H%s", fnum(xOf(maxX)))
		}
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="2"%s><title>%s</title></path>`, d.String(), s.Color, dash, esc(s.Name))
		if s.Markers && len(s.Points) <= 60 {
			for _, p := range s.Points {
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="2.5" fill="%s"/>`, fnum(xOf(p.X)), fnum(yOf(p.Y)), s.Color)
			}
		}
	}
	// Legend.
	lx := x0
	for _, s := range c.Series {
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<line x1="%s" y1="16" x2="%s" y2="16" stroke="%s" stroke-width="3"%s/>`, fnum(lx), fnum(lx+18), s.Color, dash)
		fmt.Fprintf(&b, `<text x="%s" y="20" font-size="12" fill="%s">%s</text>`, fnum(lx+24), palette.Text, esc(s.Name))
		lx += 34 + 7*float64(len([]rune(s.Name)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // built from escaped parts
}

// Bar is one bar of a bar chart.
type Bar struct {
	Label string
	Value float64
	Color string
}

// BarChart is a horizontal bar chart.
type BarChart struct {
	ID, Title, Desc, Unit string
	Bars                  []Bar
}

// SVG renders the chart.
func (c BarChart) SVG() template.HTML {
	const rowH, labelW, w = 26, 190, 720
	h := padTop/2 + rowH*max(1, len(c.Bars)) + 8
	var b strings.Builder
	svgOpen(&b, c.ID, c.Title, c.Desc, w, h)
	top := 0.0
	for _, bar := range c.Bars {
		top = max(top, bar.Value)
	}
	top = niceMax(top)
	for i, bar := range c.Bars {
		y := padTop/2 + i*rowH
		bw := (float64(w-labelW-80) * bar.Value / top)
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" font-size="12" fill="%s">%s</text>`, labelW-8, y+16, palette.Text, esc(bar.Label))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%s" height="%d" fill="%s"><title>%s: %s</title></rect>`, labelW, y+4, fnum(math.Max(bw, 1)), rowH-8, bar.Color, esc(bar.Label), esc(axisLabel(bar.Value, c.Unit)))
		fmt.Fprintf(&b, `<text x="%s" y="%d" font-size="12" fill="%s">%s</text>`, fnum(float64(labelW)+math.Max(bw, 1)+6), y+16, palette.Text, esc(axisLabel(bar.Value, c.Unit)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // built from escaped parts
}
