package dashboard

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"time"

	"github.com/gpubroker/gpubroker/fleet/instance"
	"github.com/gpubroker/gpubroker/optimizer"
)

type alert struct {
	Level, Text string
}

type overviewData struct {
	Spend      *SpendSummary
	SpendNote  string
	Plan       *optimizer.Plan
	PlanNote   string
	Blocked    int
	GPUs       []GPUCount
	GPUTotal   int64
	GPUChart   template.HTML
	Budgets    []budgetRow
	BudgetNote string
	Alerts     []alert
	Catalog    catalogInfo
}

type catalogInfo struct {
	Source      string
	GeneratedAt time.Time
	Age         string
	Offers      int
	Stale       bool
}

// alertKinds are the event kinds shown as alerts for a day.
var alertKinds = []instance.EventKind{instance.EventPreemptionNotice, instance.EventNotice, instance.EventDrainFailed,
	instance.EventBudgetAlert}

func (s *Server) catalogInfo() catalogInfo {
	c := s.cfg.Offers.Catalog()
	now := s.now()
	return catalogInfo{Source: c.Source, GeneratedAt: c.GeneratedAt, Age: ago(now, c.GeneratedAt), Offers: c.Len(),
		Stale: now.Sub(c.GeneratedAt) > s.cfg.StaleAfter}
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request, rq request) {
	ctx := r.Context()
	now := s.now()
	d := overviewData{Catalog: s.catalogInfo()}

	sp, err := s.cfg.Spend.Spend(ctx, now)
	switch {
	case errors.Is(err, ErrNoSource):
		d.SpendNote = "The spend ledger has not recorded any spending yet, so there is no actual spend or realised savings to show."
	case err != nil:
		s.internal(w, r, "the spend ledger", err)
		return
	default:
		d.Spend = &sp
	}

	plan, err := s.cfg.Plan.CurrentPlan(ctx)
	var inf *optimizer.InfeasibleError
	switch {
	case errors.Is(err, ErrNoSource):
		d.PlanNote = "No policy is loaded: start `gpubroker serve -f policy.yaml` to plan one, or try one on the Plan page."
	case errors.As(err, &inf):
		d.Blocked = len(inf.Blocked)
		d.Alerts = append(d.Alerts, alert{"danger", fmt.Sprintf("The current policy cannot place %d of its workloads (see Plan).", len(inf.Blocked))})
	case err != nil:
		s.internal(w, r, "the current plan", err)
		return
	default:
		d.Plan = plan
	}

	if s.cfg.Agents != nil {
		gpus, err := s.cfg.Agents.ActiveGPUs(ctx, now.Add(-s.cfg.ActiveWithin))
		if err != nil {
			s.internal(w, r, "the running GPUs", err)
			return
		}
		d.GPUs = gpus
		var bars []Bar
		for _, g := range gpus {
			d.GPUTotal += g.GPUs
			bars = append(bars, Bar{Label: g.Cloud + " " + g.Capacity, Value: float64(g.GPUs), Color: cloudColor(g.Cloud)})
		}
		if len(bars) > 0 {
			d.GPUChart = BarChart{ID: "gpus", Title: "Running GPUs by cloud and capacity type",
				Desc: fmt.Sprintf("%d GPUs on agents that reported in the last %s.", d.GPUTotal, s.cfg.ActiveWithin), Unit: "GPUs", Bars: bars}.SVG()
		}
	}

	budgets, err := s.cfg.Budgets.Budgets(ctx)
	switch {
	case errors.Is(err, ErrNoSource):
		d.BudgetNote = "No policy is loaded, so there are no budgets."
	case errors.As(err, &inf):
		d.BudgetNote = "The current policy cannot be placed, so no spending is planned under its budgets."
	case err != nil:
		s.internal(w, r, "the budgets", err)
		return
	default:
		d.Budgets = budgetRows(budgets)
		for _, b := range d.Budgets {
			if b.Over {
				d.Alerts = append(d.Alerts, alert{"danger", fmt.Sprintf("Budget %s: the plan expects %s against %s a month.", b.Name, usd(b.PlannedUSD), usd(b.MonthlyUSD))})
			}
			if b.ForecastOver {
				d.Alerts = append(d.Alerts, alert{"danger", fmt.Sprintf("Budget %s: %s spent this month; at the current burn %s by the month's end, against %s.", b.Name, usd(b.SpentUSD), usd(b.ForecastUSD), usd(b.MonthlyUSD))})
			}
		}
	}

	if d.Catalog.Stale {
		d.Alerts = append(d.Alerts, alert{"warn", fmt.Sprintf("The price catalog is %s old (from %s); plans may use outdated prices.", d.Catalog.Age, ts(d.Catalog.GeneratedAt))})
	}
	if s.cfg.Events != nil {
		var evs []Event
		for _, k := range alertKinds {
			e, err := s.cfg.Events.RecentEvents(ctx, EventQuery{Kind: string(k), Since: now.Add(-24 * time.Hour), Limit: 10})
			if err != nil {
				s.internal(w, r, "the events", err)
				return
			}
			evs = append(evs, e...)
		}
		sort.Slice(evs, func(i, j int) bool { return evs[i].ID > evs[j].ID })
		for i, e := range evs {
			if i == 10 {
				break
			}
			who := e.Instance
			if e.Workload != "" {
				who += " (" + e.Workload + ")"
			}
			d.Alerts = append(d.Alerts, alert{"warn", fmt.Sprintf("%s %s %s: %s", ts(e.At), e.Kind, who, e.Message)})
		}
	}
	s.render(w, r, http.StatusOK, "overview", s.pageFor(rq, "Overview", "overview", d))
}

type budgetRow struct {
	Budget
	Percent float64
	// Over: the plan expects more than the budget; ForecastOver: the
	// ledger's spend plus the current burn reaches more by the month's end.
	Over, ForecastOver bool
}

func budgetRows(bs []Budget) []budgetRow {
	out := make([]budgetRow, len(bs))
	for i, b := range bs {
		out[i] = budgetRow{Budget: b}
		if b.MonthlyUSD > 0 {
			out[i].Percent = 100 * b.PlannedUSD / b.MonthlyUSD
		}
		out[i].Over = b.PlannedUSD > b.MonthlyUSD
		out[i].ForecastOver = b.ForecastUSD > b.MonthlyUSD
	}
	return out
}
