package dashboard

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
)

type budgetView struct {
	budgetRow
	Chart        template.HTML
	MonthEndLeft float64
	Exhausted    time.Time
}

type budgetsData struct {
	Budgets   []budgetView
	Note      string
	SpendNote string
	Spend     *SpendSummary
}

func (s *Server) budgets(w http.ResponseWriter, r *http.Request, rq request) {
	ctx := r.Context()
	now := s.now()
	d := budgetsData{}
	sp, err := s.cfg.Spend.Spend(ctx, now)
	switch {
	case errors.Is(err, ErrNoSource):
		d.SpendNote = "The spend ledger has not recorded any spending this month yet: the charts show the plan's forecast from now, starting from the full monthly budget."
	case err != nil:
		s.internal(w, r, "the spend ledger", err)
		return
	default:
		d.Spend = &sp
	}
	bs, err := s.cfg.Budgets.Budgets(ctx)
	var inf *optimizer.InfeasibleError
	switch {
	case errors.Is(err, ErrNoSource):
		d.Note = "No policy is loaded, so there are no budgets. Budgets come from the policy file's budgets: section."
	case errors.As(err, &inf):
		d.Note = "The current policy cannot be placed, so no spending is planned; see the Plan page for the blocked workloads."
	case err != nil:
		s.internal(w, r, "the budgets", err)
		return
	}
	var plan *optimizer.Plan
	if len(bs) > 0 {
		plan, err = s.cfg.Plan.CurrentPlan(ctx)
		if err != nil && !errors.Is(err, ErrNoSource) && !errors.As(err, &inf) {
			s.internal(w, r, "the current plan", err)
			return
		}
	}
	if err == nil && len(bs) == 0 && d.Note == "" {
		d.Note = "The loaded policy defines no budgets."
	}
	for i, b := range budgetRows(bs) {
		d.Budgets = append(d.Budgets, s.burnDown(i, b, plan, d.Spend, now))
	}
	s.render(w, r, http.StatusOK, "budgets", s.pageFor(rq, "Budgets", "budgets", d))
}

// burnDown draws a budget's remaining amount through the month: what is
// left now (the whole budget when no ledger records spending), then the
// plan's forecast, each covered placement costing its expected cost spread
// evenly over its expected hours from the plan's time.
func (s *Server) burnDown(i int, b budgetRow, plan *optimizer.Plan, sp *SpendSummary, now time.Time) budgetView {
	v := budgetView{budgetRow: b}
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	end := month.AddDate(0, 1, 0)
	left := b.MonthlyUSD
	var actual, burn Series
	if sp != nil {
		// The ledger's spend under this budget so far, then what the
		// instances running now would add by the month's end.
		left = b.MonthlyUSD - b.SpentUSD
		actual = Series{Name: "spent (ledger)", Color: palette.Text, Points: []Point{{month, b.MonthlyUSD}}}
		if b.Team == "" && b.Workload == "" && len(sp.Daily) > 0 {
			// The fleet-wide budget: day by day.
			run := b.MonthlyUSD
			for _, day := range sp.Daily {
				run -= day.USD
				at := day.Day.Add(24 * time.Hour)
				if at.After(now) {
					at = now
				}
				actual.Points = append(actual.Points, Point{at, run})
			}
			left = run
		} else {
			actual.Points = append(actual.Points, Point{now, left})
		}
		if b.BurnPerHourUSD > 0 {
			burn = Series{Name: "at the current burn", Color: palette.Warn, Dashed: true,
				Points: []Point{{now, left}, {end, max(left-b.BurnPerHourUSD*end.Sub(now).Hours(), 0)}}}
		}
	}
	type rate struct {
		perHour float64
		until   time.Time
	}
	var rates []rate
	if plan != nil {
		start := plan.GeneratedAt
		if start.IsZero() || start.Before(now) {
			start = now
		}
		for _, p := range plan.Placements {
			if !slices.Contains(b.Workloads, p.Workload) || p.ExpectedHours <= 0 {
				continue
			}
			rates = append(rates, rate{p.ExpectedCost / p.ExpectedHours, start.Add(time.Duration(p.ExpectedHours * float64(time.Hour)))})
		}
	}
	forecast := Series{Name: "forecast (plan)", Color: palette.Forecast, Dashed: true}
	const steps = 48
	step := end.Sub(now) / steps
	rem := left
	forecast.Points = append(forecast.Points, Point{now, rem})
	for k := 1; k <= steps && step > 0; k++ {
		t0, t1 := now.Add(time.Duration(k-1)*step), now.Add(time.Duration(k)*step)
		for _, r := range rates {
			if r.until.After(t0) {
				stop := t1
				if r.until.Before(stop) {
					stop = r.until
				}
				h := stop.Sub(t0).Hours()
				rem -= r.perHour * h
			}
		}
		if rem < 0 && v.Exhausted.IsZero() {
			v.Exhausted = t1
		}
		forecast.Points = append(forecast.Points, Point{t1, rem})
	}
	v.MonthEndLeft = rem
	series := []Series{forecast}
	if len(actual.Points) > 0 {
		series = append([]Series{actual}, series...)
	}
	if len(burn.Points) > 0 {
		series = append(series, burn)
	}
	for k := range forecast.Points {
		forecast.Points[k].Y = max(forecast.Points[k].Y, 0)
	}
	desc := fmt.Sprintf("Budget %s: %s a month; forecast left at month end %s.", b.Name, usd(b.MonthlyUSD), usd(rem))
	if sp != nil {
		desc += fmt.Sprintf(" Spent so far this month %s; at the current burn of %s/h, %s by the month's end.", usd(b.SpentUSD), usd(b.BurnPerHourUSD), usd(b.ForecastUSD))
	}
	if !v.Exhausted.IsZero() {
		desc += " The forecast runs out on " + v.Exhausted.UTC().Format("2006-01-02") + "."
	}
	v.Chart = LineChart{ID: fmt.Sprintf("budget-%d", i), Title: "Burn-down of budget " + b.Name, Desc: desc, Unit: "$",
		Series: series, Limit: 0, LimitLabel: "budget exhausted"}.SVG()
	return v
}
