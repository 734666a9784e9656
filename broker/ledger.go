package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/fleet/instance"
	"github.com/gpubroker/gpubroker/fleet/ledger"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// LedgerSchedule is how often the leader brings the spend ledger up to date.
const LedgerSchedule = "@every 5m"

// ledgerRecompute is how far back a pass recomputes the days of instances
// that ended: long enough to cover a leader outage of a day, short enough
// that a pass stays cheap on large fleets.
const ledgerRecompute = 48 * time.Hour

// LedgerMetrics are the spend gauges on the broker's registry.
type LedgerMetrics struct {
	spend   *prometheus.GaugeVec
	savings *prometheus.GaugeVec
	budget  *prometheus.GaugeVec
}

// NewLedgerMetrics registers the spend gauges on reg.
func NewLedgerMetrics(reg prometheus.Registerer) *LedgerMetrics {
	m := &LedgerMetrics{
		spend: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gpubroker_spend_month_usd",
			Help: "Spend this calendar month (UTC) from the ledger, by cloud and capacity type."}, []string{"cloud", "capacity"}),
		savings: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gpubroker_savings_month_usd",
			Help: "All-on-demand cost minus spend this month, by cloud."}, []string{"cloud"}),
		budget: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gpubroker_budget_forecast_ratio",
			Help: "Each budget's month-end forecast over its limit (1 = exactly the budget)."}, []string{"budget"}),
	}
	if reg != nil {
		reg.MustRegister(m.spend, m.savings, m.budget)
	}
	return m
}

// LedgerSources is what a ledger pass reads.
type LedgerSources struct {
	Broker  *store.Broker
	Catalog func() *pricing.Catalog
	Policy  *policy.Policy
	Metrics *LedgerMetrics
	// Levels are the budget thresholds that record a budget_alert event
	// (default 50, 80, 100%).
	Levels []float64
}

// usages are the instances' lives as billing sees them: agent registration
// to last heartbeat (drained) or now (running), priced from the catalog.
func usages(insts []store.InstanceRecord, cat *pricing.Catalog, teamOf map[string]string) []ledger.Usage {
	var out []ledger.Usage
	for _, r := range insts {
		u := ledger.Usage{Instance: r.ID, Workload: r.Workload, Team: teamOf[r.Workload], Cloud: r.Cloud, Region: r.Region,
			Zone: r.Zone, InstanceType: r.InstanceType, Capacity: r.Capacity, Start: r.RegisteredAt}
		if r.State == store.StateDrained {
			u.End = r.LastHeartbeat
			if u.End.IsZero() {
				u.End = r.RegisteredAt
			}
		}
		if cat != nil {
			u.Price, u.OnDemand = instancePrice(cat, r)
		}
		out = append(out, u)
	}
	return out
}

// RunLedger brings the ledger up to now: it recomputes the days of every
// running instance and of those that ended within ledgerRecompute, stores
// them, updates the spend gauges, and records a budget_alert event the first
// time this month a budget crosses each threshold.
func RunLedger(ctx context.Context, src LedgerSources, now time.Time) error {
	insts, err := src.Broker.ListInstances(ctx, "", "")
	if err != nil {
		return fmt.Errorf("ledger: instances: %w", err)
	}
	teamOf := map[string]string{}
	if src.Policy != nil {
		for _, w := range src.Policy.Workloads {
			teamOf[w.Name] = w.Team
		}
	}
	var cat *pricing.Catalog
	if src.Catalog != nil {
		cat = src.Catalog()
	}
	us := usages(insts, cat, teamOf)
	var entries []store.SpendEntry
	for _, u := range us {
		if !u.End.IsZero() && now.Sub(u.End) > ledgerRecompute {
			continue // settled in an earlier pass
		}
		for _, e := range ledger.Entries(u, now) {
			entries = append(entries, store.SpendEntry{Day: e.Day, Instance: e.Instance, Workload: e.Workload, Team: e.Team,
				Cloud: e.Cloud, Capacity: e.Capacity, Seconds: e.Seconds, Cost: e.Cost, OnDemand: e.OnDemand, UpdatedAt: now})
		}
	}
	if err := src.Broker.UpsertSpend(ctx, entries); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	month := ledger.MonthStart(now)
	rows, err := src.Broker.ListSpend(ctx, month, time.Time{})
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	monthEntries := ledgerEntries(rows, teamOf)
	spend := map[[2]string]float64{}
	savings := map[string]float64{}
	for _, r := range rows {
		spend[[2]string{r.Cloud, r.Capacity}] += r.Cost
		savings[r.Cloud] += r.OnDemand - r.Cost
	}
	if m := src.Metrics; m != nil {
		m.spend.Reset()
		m.savings.Reset()
		for k, v := range spend {
			m.spend.WithLabelValues(k[0], k[1]).Set(v)
		}
		for k, v := range savings {
			m.savings.WithLabelValues(k).Set(v)
		}
	}
	if src.Policy == nil {
		return nil
	}
	var running []ledger.Usage
	for _, u := range us {
		if u.End.IsZero() {
			running = append(running, u)
		}
	}
	prior, err := src.Broker.ListEvents(ctx, store.EventFilter{Kind: string(instance.EventBudgetAlert), Since: month, Limit: 1000})
	if err != nil {
		return fmt.Errorf("ledger: budget events: %w", err)
	}
	seen := map[string]bool{}
	for _, e := range prior {
		seen[e.IdempotencyKey] = true
	}
	for _, b := range src.Policy.Budgets {
		st := ledger.BudgetStatus(ledger.Budget{Name: b.Name, Team: b.Team, Workload: b.Workload, MonthlyUSD: b.MonthlyUSD},
			monthEntries, running, now, src.Levels)
		if src.Metrics != nil && b.MonthlyUSD > 0 {
			src.Metrics.budget.WithLabelValues(b.Name).Set(st.Forecast / b.MonthlyUSD)
		}
		if st.Level == 0 {
			continue
		}
		key := fmt.Sprintf("budget/%s/%s/%.0f", b.Name, month.Format("2006-01"), st.Level*100)
		if seen[key] {
			continue
		}
		data, _ := json.Marshal(map[string]any{"budget": b.Name, "level": st.Level, "spent_usd": st.Spent,
			"forecast_usd": st.Forecast, "monthly_usd": b.MonthlyUSD, "action": budgetAction(b)})
		_, err := src.Broker.AddEvent(ctx, store.EventRecord{At: now, Kind: string(instance.EventBudgetAlert), IdempotencyKey: key,
			Message: fmt.Sprintf("budget %s: spent $%.2f of $%.2f this month (%.0f%% level), forecast $%.2f", b.Name, st.Spent,
				b.MonthlyUSD, st.Level*100, st.Forecast), Data: data})
		if err != nil {
			return fmt.Errorf("ledger: budget event: %w", err)
		}
	}
	return nil
}

// budgetAction is what the policy says happens at 100%.
func budgetAction(b policy.Budget) string {
	if b.Action == "" {
		return policy.BudgetAlert
	}
	return b.Action
}

// SpendView answers GET /api/v1/spend from the stored ledger.
func SpendView(ctx context.Context, b *store.Broker, q apiv1.SpendQuery) (apiv1.Spend, error) {
	rows, err := b.ListSpend(ctx, q.Since, q.Until)
	if err != nil {
		return apiv1.Spend{}, err
	}
	out := apiv1.Spend{Since: q.Since, Until: q.Until, By: q.By, Lines: []apiv1.SpendLine{}}
	idx := map[string]int{}
	for _, r := range rows {
		var key string
		switch q.By {
		case "team":
			key = r.Team
		case "workload":
			key = r.Workload
		case "day":
			key = r.Day.Format("2006-01-02")
		case "capacity":
			key = r.Capacity
		default:
			key = r.Cloud
		}
		i, ok := idx[key]
		if !ok {
			i = len(out.Lines)
			idx[key] = i
			out.Lines = append(out.Lines, apiv1.SpendLine{Key: key})
		}
		out.Lines[i].Cost += r.Cost
		out.Lines[i].OnDemand += r.OnDemand
		out.Cost += r.Cost
		out.OnDemand += r.OnDemand
	}
	for i := range out.Lines {
		l := &out.Lines[i]
		l.Cost, l.OnDemand = round2(l.Cost), round2(l.OnDemand)
		l.Savings = round2(l.OnDemand - l.Cost)
	}
	sort.Slice(out.Lines, func(i, j int) bool { return out.Lines[i].Key < out.Lines[j].Key })
	out.Cost, out.OnDemand = round2(out.Cost), round2(out.OnDemand)
	out.Savings = round2(out.OnDemand - out.Cost)
	return out, nil
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// withSpend adds this month's ledger figures to the plan's budgets.
func withSpend(ctx context.Context, b *store.Broker, cat *pricing.Catalog, pol *policy.Policy, bs apiv1.Budgets, now time.Time) (apiv1.Budgets, error) {
	month := ledger.MonthStart(now)
	rows, err := b.ListSpend(ctx, month, time.Time{})
	if err != nil {
		return bs, err
	}
	insts, err := b.ListInstances(ctx, "", "")
	if err != nil {
		return bs, err
	}
	teamOf := map[string]string{}
	action := map[string]string{}
	if pol != nil {
		for _, w := range pol.Workloads {
			teamOf[w.Name] = w.Team
		}
		for _, pb := range pol.Budgets {
			action[pb.Name] = budgetAction(pb)
		}
	}
	var running []ledger.Usage
	for _, u := range usages(insts, cat, teamOf) {
		if u.End.IsZero() {
			running = append(running, u)
		}
	}
	entries := ledgerEntries(rows, teamOf)
	for i := range bs.Budgets {
		s := &bs.Budgets[i]
		st := ledger.BudgetStatus(ledger.Budget{Name: s.Name, Team: s.Team, Workload: s.Workload, MonthlyUSD: s.MonthlyUSD}, entries, running, now, nil)
		s.SpentUSD, s.BurnPerHourUSD, s.ForecastUSD = round2(st.Spent), round2(st.BurnPerHour), round2(st.Forecast)
		s.ForecastPercent = math.Round(st.ForecastPct*10) / 10
		if a := action[s.Name]; a != "" {
			s.Action = a
		} else {
			s.Action = policy.BudgetAlert
		}
	}
	return bs, nil
}

// budgetReached says whether a budget with the given action (stop-scaling,
// spot-only) that covers w has reached 100% this month (from the ledger).
func budgetReached(ctx context.Context, b *store.Broker, pol *policy.Policy, w policy.Workload, now time.Time, action string, log *slog.Logger) bool {
	if pol == nil {
		return false
	}
	var budgets []policy.Budget
	for _, bd := range pol.Budgets {
		if bd.Action == action && (bd.Team == "" || bd.Team == w.Team) && (bd.Workload == "" || bd.Workload == w.Name) {
			budgets = append(budgets, bd)
		}
	}
	if len(budgets) == 0 {
		return false
	}
	rows, err := b.ListSpend(ctx, ledger.MonthStart(now), time.Time{})
	if err != nil {
		log.Warn("budget check: ledger unavailable; acting as if the budget were not reached", "action", action, "err", err)
		return false
	}
	teamOf := map[string]string{}
	for _, pw := range pol.Workloads {
		teamOf[pw.Name] = pw.Team
	}
	entries := ledgerEntries(rows, teamOf)
	for _, bd := range budgets {
		st := ledger.BudgetStatus(ledger.Budget{Name: bd.Name, Team: bd.Team, Workload: bd.Workload, MonthlyUSD: bd.MonthlyUSD}, entries, nil, now, nil)
		if bd.MonthlyUSD > 0 && st.Spent >= bd.MonthlyUSD {
			return true
		}
	}
	return false
}

// ledgerEntries turns stored spend rows into the ledger's entries; a row
// stored without a team takes its workload's team from the policy.
func ledgerEntries(rows []store.SpendEntry, teamOf map[string]string) []ledger.Entry {
	out := make([]ledger.Entry, len(rows))
	for i, r := range rows {
		team := r.Team
		if team == "" {
			team = teamOf[r.Workload]
		}
		out[i] = ledger.Entry{Day: r.Day, Instance: r.Instance, Workload: r.Workload, Team: team, Cloud: r.Cloud,
			Capacity: r.Capacity, Seconds: r.Seconds, Cost: r.Cost, OnDemand: r.OnDemand}
	}
	return out
}
