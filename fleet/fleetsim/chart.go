package fleetsim

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// WriteSVG draws the run: cumulative spend (top) and ready replicas and
// live instances (bottom) over the simulated days.
func (r *Report) WriteSVG(w io.Writer, title string) error {
	const width, height, left, right, top, panel, gap = 900.0, 520.0, 70.0, 20.0, 40.0, 200.0, 50.0
	pts := r.Series
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15">%s</text>`+"\n", left, html.EscapeString(title))
	if len(pts) < 2 {
		b.WriteString("</svg>\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	t0, t1 := pts[0].At, pts[len(pts)-1].At
	span := t1.Sub(t0).Hours()
	x := func(i int) float64 { return left + (width-left-right)*pts[i].At.Sub(t0).Hours()/span }
	maxSpend, maxN := 1.0, 1.0
	for _, p := range pts {
		maxSpend = math.Max(maxSpend, p.SpendUSD)
		maxN = math.Max(maxN, float64(p.Instances))
	}
	axes := func(y0 float64, label string, maxV float64, unit string) {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#444"/>`+"\n", left, y0+panel, width-right, y0+panel)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#444"/>`+"\n", left, y0, left, y0+panel)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="end">%s%.0f</text>`+"\n", left-4, y0+8, unit, maxV)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="end">0</text>`+"\n", left-4, y0+panel)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="12">%s</text>`+"\n", left+40, y0-4, html.EscapeString(label))
		for d := 0.0; d <= span/24+1e-9; d += math.Max(1, math.Ceil(span/24/10)) {
			xx := left + (width-left-right)*d*24/span
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="middle">%.0fd</text>`+"\n", xx, y0+panel+13, d)
		}
	}
	line := func(y0, maxV float64, color string, v func(Point) float64) {
		b.WriteString(`<polyline fill="none" stroke="` + color + `" stroke-width="1.5" points="`)
		for i, p := range pts {
			fmt.Fprintf(&b, "%.1f,%.1f ", x(i), y0+panel-panel*v(p)/maxV)
		}
		b.WriteString(`"/>` + "\n")
	}
	y1 := top
	axes(y1, "spend so far (USD)", maxSpend, "$")
	line(y1, maxSpend, "#c0392b", func(p Point) float64 { return p.SpendUSD })
	y2 := top + panel + gap
	axes(y2, "ready replicas (blue), live instances (grey)", maxN, "")
	line(y2, maxN, "#999999", func(p Point) float64 { return float64(p.Instances) })
	line(y2, maxN, "#2471a3", func(p Point) float64 { return float64(p.Replicas) })
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
