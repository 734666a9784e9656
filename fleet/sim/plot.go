package sim

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
)

// Colours of the charts.
const (
	colSpot     = "#2b7bb9"
	colOnDemand = "#e07b24"
	colAvail    = "#9bd19b"
	colLine     = "#888888"
	colProgress = "#222222"
	colFrontier = "#c0392b"
)

type svg struct {
	b strings.Builder
}

func (s *svg) f(format string, args ...any) { fmt.Fprintf(&s.b, format, args...) }

func (s *svg) text(x, y float64, anchor, size, txt string) {
	s.f(`<text x="%.1f" y="%.1f" text-anchor="%s" font-size="%s">%s</text>`+"\n", x, y, anchor, size, html.EscapeString(txt))
}

// niceStep picks a round axis step for a range.
func niceStep(span float64, ticks int) float64 {
	raw := span / float64(max(1, ticks))
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// WriteTrainingSVG draws one training run: each pool's spot capacity, what
// capacity ran, and work done against the straight line to the deadline.
func WriteTrainingSVG(w io.Writer, c Training, p *Pools, run Run, policy string) error {
	if len(run.Steps) == 0 {
		return fmt.Errorf("%w: the run has no recorded timeline", ErrSetting)
	}
	const width, left, right = 960.0, 150.0, 20.0
	rowH := 14.0
	k := len(p.Traces)
	top := 40.0
	availTop := top
	runTop := availTop + float64(k)*rowH + 12
	progTop := runTop + rowH + 30
	progH := 260.0
	height := progTop + progH + 64
	plotW := width - left - right
	gap := float64(p.Gap)
	hours := math.Max(c.Deadline.Hours(), float64(len(run.Steps))*gap/3600)
	span := min(p.Len-run.Start, int(math.Ceil(hours*3600/gap)))
	x := func(h float64) float64 { return left + plotW*h/hours }
	tickW := plotW * gap / 3600 / hours
	var s svg
	s.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif">`+"\n", width, height, width, height)
	s.f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	s.text(left, 22, "start", "15", fmt.Sprintf("%s: %.0f h of work, deadline %.0f h, start tick %d — cost %.3f of on-demand", policy, c.Work.Hours(), c.Deadline.Hours(), run.Start, run.Normalized))
	// Availability rows, merged into runs of equal state to keep the file small.
	for q := range k {
		y := availTop + float64(q)*rowH
		s.text(left-6, y+rowH-3, "end", "11", p.Traces[q].Name)
		up := func(i int) bool { return p.Available(q, run.Start+i) }
		for i := 0; i < span; {
			j := i
			for j < span && up(j) == up(i) {
				j++
			}
			if up(i) {
				s.f(`<rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s"/>`+"\n", x(float64(i)*gap/3600), y+1, float64(j-i)*tickW, rowH-2, colAvail)
			}
			i = j
		}
	}
	s.text(left-6, runTop+rowH-3, "end", "11", "running")
	for i := 0; i < len(run.Steps); {
		j := i
		for j < len(run.Steps) && run.Steps[j].Action == run.Steps[i].Action {
			j++
		}
		if a := run.Steps[i].Action; a.Capacity != spotpolicy.None {
			col := colOnDemand
			if a.Capacity == spotpolicy.Spot {
				col = colSpot
			}
			s.f(`<rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n", x(float64(i)*gap/3600), runTop, float64(j-i)*tickW, rowH, col, a)
			if a.Capacity == spotpolicy.Spot { // mark the pool it ran in
				s.f(`<rect x="%.2f" y="%.1f" width="%.2f" height="4" fill="%s"/>`+"\n", x(float64(i)*gap/3600), availTop+float64(a.Pool+1)*rowH-5, float64(j-i)*tickW, colSpot)
			}
		}
		i = j
	}
	// Progress panel.
	work := c.Work.Hours()
	y := func(h float64) float64 { return progTop + progH - progH*h/work }
	s.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#ccc"/>`+"\n", left, progTop, plotW, progH)
	step := niceStep(hours, 10)
	for h := 0.0; h <= hours+1e-9; h += step {
		s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", x(h), progTop, x(h), progTop+progH)
		s.text(x(h), progTop+progH+14, "middle", "11", fmt.Sprintf("%g", h))
	}
	s.text(left+plotW/2, progTop+progH+32, "middle", "12", "hours since start")
	ystep := niceStep(work, 6)
	for h := 0.0; h <= work+1e-9; h += ystep {
		s.text(left-6, y(h)+4, "end", "11", fmt.Sprintf("%g h", h))
	}
	s.text(left-6, progTop-6, "end", "11", "work done")
	dl := c.Deadline.Hours()
	s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="5,4"/>`+"\n", x(0), y(0), x(dl), y(work), colLine)
	s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="2,3"/>`+"\n", x(dl-work), y(0), x(dl), y(work), colOnDemand)
	s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="red"/>`+"\n", x(dl), progTop, x(dl), progTop+progH)
	var pts []string
	pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(0), y(0)))
	for i, st := range run.Steps {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(i+1)*gap/3600), y(st.Done/3600)))
	}
	s.f(`<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", strings.Join(pts, " "), colProgress)
	// Legend.
	ly := height - 10
	for i, l := range []struct{ col, name string }{{colAvail, "spot capacity"}, {colSpot, "ran on spot"}, {colOnDemand, "ran on on-demand"}, {colLine, "straight line"}, {colOnDemand, "last on-demand start"}, {colProgress, "work done"}} {
		lx := left + float64(i)*135
		s.f(`<rect x="%.1f" y="%.1f" width="12" height="8" fill="%s"/>`+"\n", lx, ly-8, l.col)
		s.text(lx+16, ly, "start", "11", l.name)
	}
	s.f("</svg>\n")
	_, err := io.WriteString(w, s.b.String())
	return err
}

// FrontierPoint is one setting of a policy's knobs and what it reached.
type FrontierPoint struct {
	Label    string  `json:"label"`
	Cost     float64 `json:"cost_vs_on_demand"`
	AtTarget float64 `json:"at_target"`
}

// ParetoFront returns the points no other point beats on both cost and
// availability, by ascending cost.
func ParetoFront(pts []FrontierPoint) []FrontierPoint {
	s := append([]FrontierPoint(nil), pts...)
	sort.Slice(s, func(i, j int) bool {
		if s[i].Cost != s[j].Cost {
			return s[i].Cost < s[j].Cost
		}
		return s[i].AtTarget > s[j].AtTarget
	})
	var out []FrontierPoint
	best := math.Inf(-1)
	for _, p := range s {
		if p.AtTarget > best {
			out = append(out, p)
			best = p.AtTarget
		}
	}
	return out
}

// WriteFrontierSVG draws availability against cost for every point, the
// Pareto front through them, and reference points (drawn hollow).
func WriteFrontierSVG(w io.Writer, title string, pts, refs []FrontierPoint) error {
	if len(pts) == 0 {
		return fmt.Errorf("%w: no points to draw", ErrSetting)
	}
	const width, height, left, right, top, bottom = 980.0, 520.0, 70.0, 300.0, 40.0, 50.0
	all := append(append([]FrontierPoint(nil), pts...), refs...)
	minC, maxC, minA := math.Inf(1), math.Inf(-1), math.Inf(1)
	for _, p := range all {
		minC, maxC, minA = math.Min(minC, p.Cost), math.Max(maxC, p.Cost), math.Min(minA, p.AtTarget)
	}
	minC, maxC = math.Floor(minC*20)/20, math.Ceil(maxC*20)/20
	if maxC <= minC {
		maxC = minC + 0.05
	}
	minA = math.Floor(minA*100) / 100
	if minA >= 1 {
		minA = 0.99
	}
	pw, ph := width-left-right, height-top-bottom
	x := func(c float64) float64 { return left + pw*(c-minC)/(maxC-minC) }
	y := func(a float64) float64 { return top + ph*(1-(a-minA)/(1-minA)) }
	var s svg
	s.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif">`+"\n", width, height, width, height)
	s.f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	s.text(left, 22, "start", "15", title)
	s.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#ccc"/>`+"\n", left, top, pw, ph)
	for c := minC; c <= maxC+1e-9; c += niceStep(maxC-minC, 8) {
		s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", x(c), top, x(c), top+ph)
		s.text(x(c), top+ph+14, "middle", "11", fmt.Sprintf("%.2f", c))
	}
	s.text(left+pw/2, height-12, "middle", "12", "cost, fraction of all-on-demand")
	for a := minA; a <= 1+1e-9; a += niceStep(1-minA, 8) {
		s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", left, y(a), left+pw, y(a))
		s.text(left-6, y(a)+4, "end", "11", fmt.Sprintf("%.1f%%", a*100))
	}
	s.f(`<text x="16" y="%.1f" font-size="12" transform="rotate(-90 16 %.1f)" text-anchor="middle">time at target</text>`+"\n", top+ph/2, top+ph/2)
	for _, p := range pts {
		s.f(`<circle cx="%.1f" cy="%.1f" r="3" fill="%s" fill-opacity="0.45"><title>%s: %.2f%% at %.3f</title></circle>`+"\n", x(p.Cost), y(p.AtTarget), colSpot, html.EscapeString(p.Label), p.AtTarget*100, p.Cost)
	}
	front := ParetoFront(pts)
	var line []string
	for _, p := range front {
		line = append(line, fmt.Sprintf("%.1f,%.1f", x(p.Cost), y(p.AtTarget)))
	}
	s.f(`<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", strings.Join(line, " "), colFrontier)
	for i, p := range refs {
		s.f(`<circle cx="%.1f" cy="%.1f" r="5" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", x(p.Cost), y(p.AtTarget), colOnDemand)
		s.text(x(p.Cost)+8, y(p.AtTarget)+4+float64(i%2)*10, "start", "10", p.Label)
	}
	ly := top + 30
	s.text(width-right+20, ly, "start", "11", "Pareto front (cost, time at target, knobs):")
	for i, p := range front {
		if i >= 24 {
			break
		}
		s.text(width-right+20, ly+14*float64(i+1), "start", "10", fmt.Sprintf("%.3f %.2f%% %s", p.Cost, p.AtTarget*100, p.Label))
	}
	s.f("</svg>\n")
	_, err := io.WriteString(w, s.b.String())
	return err
}

// WriteInferenceSVG draws one inference run: each zone's spot capacity, the
// spot and on-demand replicas running, and how many were ready against the
// target.
func WriteInferenceSVG(w io.Writer, c Inference, p *Pools, res InferenceResult) error {
	if len(res.Steps) == 0 {
		return fmt.Errorf("%w: the run has no recorded timeline", ErrSetting)
	}
	const width, left, right = 960.0, 150.0, 20.0
	rowH := 12.0
	k := len(p.Traces)
	top := 40.0
	cntTop := top + float64(k)*rowH + 20
	cntH := 220.0
	height := cntTop + cntH + 64
	plotW := width - left - right
	gap := float64(p.Gap)
	n := len(res.Steps)
	hours := float64(n) * gap / 3600
	x := func(i int) float64 { return left + plotW*float64(i)/float64(n) }
	maxN := c.Target + 1
	for _, st := range res.Steps {
		maxN = max(maxN, st.Spot+st.OnDemand)
	}
	y := func(v float64) float64 { return cntTop + cntH - cntH*v/float64(maxN) }
	var s svg
	s.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif">`+"\n", width, height, width, height)
	s.f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	s.text(left, 22, "start", "15", fmt.Sprintf("%s: target %d, ready delay %g min — %.2f%% of time at target, cost %.3f of on-demand",
		res.Policy, c.Target, c.ReadyDelay.Minutes(), res.AtTarget*100, res.Normalized))
	for q := range k {
		yy := top + float64(q)*rowH
		s.text(left-6, yy+rowH-2, "end", "10", p.Traces[q].Name)
		up := func(i int) bool { return p.Available(q, c.Start+i) }
		for i := 0; i < n; {
			j := i
			for j < n && up(j) == up(i) {
				j++
			}
			if up(i) {
				s.f(`<rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s"/>`+"\n", x(i), yy+1, x(j)-x(i), rowH-2, colAvail)
			}
			i = j
		}
	}
	// Stacked replica counts (spot below, on-demand above) as step areas.
	area := func(lo, hi func(InferenceStep) int, col string) {
		var pts []string
		for i, st := range res.Steps {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(i), y(float64(hi(st))), x(i+1), y(float64(hi(st)))))
		}
		for i := n - 1; i >= 0; i-- {
			st := res.Steps[i]
			pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(i+1), y(float64(lo(st))), x(i), y(float64(lo(st)))))
		}
		s.f(`<polygon points="%s" fill="%s" fill-opacity="0.8"/>`+"\n", strings.Join(pts, " "), col)
	}
	zero := func(InferenceStep) int { return 0 }
	spotN := func(st InferenceStep) int { return st.Spot }
	all := func(st InferenceStep) int { return st.Spot + st.OnDemand }
	area(zero, spotN, colSpot)
	area(spotN, all, colOnDemand)
	var ready []string
	for i, st := range res.Steps {
		ready = append(ready, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", x(i), y(float64(st.Ready)), x(i+1), y(float64(st.Ready))))
	}
	s.f(`<polyline points="%s" fill="none" stroke="%s" stroke-width="1"/>`+"\n", strings.Join(ready, " "), colProgress)
	s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="red" stroke-dasharray="5,4"/>`+"\n", left, y(float64(c.Target)), left+plotW, y(float64(c.Target)))
	s.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#ccc"/>`+"\n", left, cntTop, plotW, cntH)
	for v := 0; v <= maxN; v++ {
		s.text(left-6, y(float64(v))+4, "end", "11", fmt.Sprint(v))
	}
	s.text(left-6, cntTop-6, "end", "11", "replicas")
	step := niceStep(hours, 10)
	for h := 0.0; h <= hours+1e-9; h += step {
		xi := left + plotW*h/hours
		s.f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", xi, cntTop, xi, cntTop+cntH)
		s.text(xi, cntTop+cntH+14, "middle", "11", fmt.Sprintf("%g", h))
	}
	s.text(left+plotW/2, cntTop+cntH+32, "middle", "12", "hours since start")
	ly := height - 10
	for i, l := range []struct{ col, name string }{{colAvail, "spot capacity"}, {colSpot, "spot replicas"}, {colOnDemand, "on-demand replicas"}, {colProgress, "ready"}, {"red", "target"}} {
		lx := left + float64(i)*140
		s.f(`<rect x="%.1f" y="%.1f" width="12" height="8" fill="%s"/>`+"\n", lx, ly-8, l.col)
		s.text(lx+16, ly, "start", "11", l.name)
	}
	s.f("</svg>\n")
	_, err := io.WriteString(w, s.b.String())
	return err
}
