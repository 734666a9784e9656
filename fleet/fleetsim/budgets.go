package fleetsim

import (
	"context"
	"time"

	"github.com/gpubroker/gpubroker/fleet/ledger"
	"github.com/gpubroker/gpubroker/policy"
)

// BudgetReport is one of the policy's budgets over the simulated months.
type BudgetReport struct {
	Name       string  `json:"name"`
	Team       string  `json:"team,omitempty"`
	Workload   string  `json:"workload,omitempty"`
	MonthlyUSD float64 `json:"monthly_usd"`
	// Action is what the controller did at 100% (policy.Budget*).
	Action string        `json:"action"`
	Months []BudgetMonth `json:"months"`
}

// BudgetMonth is a budget's spend in one calendar month (UTC) of the run.
type BudgetMonth struct {
	Month    string  `json:"month"` // 2026-01
	SpentUSD float64 `json:"spent_usd"`
	// ReachedHours is when spending reached the budget, in hours after the
	// simulation's start (0: it did not).
	ReachedHours float64 `json:"reached_hours,omitempty"`
	// Levels are the alert thresholds (50, 80, 100%, as the broker's
	// budget_alert events) spending crossed this month, in order.
	Levels []BudgetLevel `json:"levels,omitempty"`
}

// BudgetLevel is when a budget's spend first crossed one threshold in a
// month, as the broker's budget_alert event would record it.
type BudgetLevel struct {
	Percent      float64 `json:"percent"`
	ReachedHours float64 `json:"reached_hours"`
}

// budgets tracks the policy's monthly budgets as the broker does
// (broker/ledger.go): spend of the budget's workloads this calendar month,
// by the ledger's billing rules, against its limit. The broker reads spend
// from its store; here it is the settled spend of gone instances plus the
// live instances billed to now.
type budgets struct {
	s    *Sim
	list []policy.Budget
	// teamOf is each workload's team from the policy as given (finished
	// jobs leave the running policy, not their spend).
	teamOf map[string]string
	// settled is micro-USD by month and workload, of gone instances.
	settled map[time.Time]map[string]int64
	// at is when spent was last computed; spent is micro-USD this month
	// per budget at that time.
	at    time.Time
	spent []int64
	// buf is update's scratch for a live instance's ledger entries.
	buf []ledger.Entry
	// reached is when each budget reached its limit, by month; crossed
	// when it crossed each of ledger.DefaultLevels.
	reached []map[time.Time]time.Time
	crossed []map[levelMonth]time.Time
}

// levelMonth is one alert threshold in one month.
type levelMonth struct {
	month time.Time
	level int // index into ledger.DefaultLevels
}

func newBudgets(s *Sim, pol *policy.Policy) *budgets {
	if len(pol.Budgets) == 0 {
		return nil
	}
	b := &budgets{s: s, list: pol.Budgets, teamOf: map[string]string{}, settled: map[time.Time]map[string]int64{},
		spent: make([]int64, len(pol.Budgets)), reached: make([]map[time.Time]time.Time, len(pol.Budgets)),
		crossed: make([]map[levelMonth]time.Time, len(pol.Budgets))}
	for _, w := range pol.Workloads {
		b.teamOf[w.Name] = w.Team
	}
	for i := range b.reached {
		b.reached[i] = map[time.Time]time.Time{}
		b.crossed[i] = map[levelMonth]time.Time{}
	}
	return b
}

func (b *budgets) ledgerBudget(i int) ledger.Budget {
	bd := b.list[i]
	return ledger.Budget{Name: bd.Name, Team: bd.Team, Workload: bd.Workload, MonthlyUSD: bd.MonthlyUSD}
}

// settle books a gone instance's spend by month.
func (b *budgets) settle(entries []ledger.Entry) {
	for _, e := range entries {
		m := ledger.MonthStart(e.Day)
		byW := b.settled[m]
		if byW == nil {
			byW = map[string]int64{}
			b.settled[m] = byW
		}
		byW[e.Workload] += micro(e.Cost)
	}
}

// update computes every budget's spend this month at now and records the
// first time each reaches its limit. Sums are in micro-USD so they do not
// depend on map order.
func (b *budgets) update(now time.Time) {
	if b.at.Equal(now) {
		return
	}
	b.at = now
	month := ledger.MonthStart(now)
	byW := map[string]int64{}
	for w, v := range b.settled[month] {
		byW[w] += v
	}
	for _, in := range b.s.live {
		b.buf = b.s.appendEntries(b.buf[:0], in, now)
		for _, e := range b.buf {
			if !e.Day.Before(month) {
				byW[e.Workload] += micro(e.Cost)
			}
		}
	}
	for i := range b.list {
		lb := b.ledgerBudget(i)
		var sum int64
		for w, v := range byW {
			if lb.Matches(w, b.teamOf[w]) {
				sum += v
			}
		}
		b.spent[i] = sum
		if lb.MonthlyUSD > 0 && sum >= micro(lb.MonthlyUSD) {
			if _, ok := b.reached[i][month]; !ok {
				b.reached[i][month] = now
			}
		}
		for k, l := range ledger.DefaultLevels {
			if lb.MonthlyUSD > 0 && sum >= micro(l*lb.MonthlyUSD) {
				if _, ok := b.crossed[i][levelMonth{month, k}]; !ok {
					b.crossed[i][levelMonth{month, k}] = now
				}
			}
		}
	}
}

// spentAction says whether a budget with action over w has reached its
// limit this month (fleet.ChainConfig's StopScaling and SpotOnly).
func (b *budgets) spentAction(action string) func(context.Context, policy.Workload, time.Time) bool {
	return func(_ context.Context, w policy.Workload, now time.Time) bool {
		b.update(now)
		month := ledger.MonthStart(now)
		for i, bd := range b.list {
			if bd.Action != action || !b.ledgerBudget(i).Matches(w.Name, w.Team) {
				continue
			}
			if _, ok := b.reached[i][month]; ok {
				return true
			}
		}
		return false
	}
}

// report is every budget's spend by month, after every instance was
// accounted to the end of the run.
func (b *budgets) report(start, end time.Time) []BudgetReport {
	var months []time.Time
	for m := ledger.MonthStart(start); m.Before(end); m = m.AddDate(0, 1, 0) {
		months = append(months, m)
	}
	out := make([]BudgetReport, 0, len(b.list))
	for i, bd := range b.list {
		action := bd.Action
		if action == "" {
			action = policy.BudgetAlert
		}
		r := BudgetReport{Name: bd.Name, Team: bd.Team, Workload: bd.Workload, MonthlyUSD: bd.MonthlyUSD, Action: action}
		lb := b.ledgerBudget(i)
		for _, m := range months {
			var sum int64 // whole micro-USD: the order of the sum does not matter
			for w, v := range b.settled[m] {
				if lb.Matches(w, b.teamOf[w]) {
					sum += v
				}
			}
			bm := BudgetMonth{Month: m.Format("2006-01"), SpentUSD: round(float64(sum)/1e6, 2)}
			if at, ok := b.reached[i][m]; ok {
				bm.ReachedHours = round(at.Sub(start).Hours(), 3)
			}
			for k, l := range ledger.DefaultLevels {
				if at, ok := b.crossed[i][levelMonth{m, k}]; ok {
					bm.Levels = append(bm.Levels, BudgetLevel{Percent: 100 * l, ReachedHours: round(at.Sub(start).Hours(), 3)})
				}
			}
			r.Months = append(r.Months, bm)
		}
		out = append(out, r)
	}
	return out
}
