package report

import (
	"errors"
	"fmt"
	"github.com/gpubroker/gpubroker/fleet/instance"
	"github.com/gpubroker/gpubroker/fleet/ledger"
	"math"
	"sort"
	"strings"
	"time"
)

// Period is the span a report covers.
type Period string

// Periods a report can cover.
const (
	Day   Period = "day"
	Week  Period = "week"
	Month Period = "month"
)

// ErrBadPeriod is returned for a period other than day, week or month.
var ErrBadPeriod = errors.New("bad report period")

// ParsePeriod reads "day", "week" or "month".
func ParsePeriod(s string) (Period, error) {
	switch p := Period(strings.ToLower(strings.TrimSpace(s))); p {
	case Day, Week, Month:
		return p, nil
	}
	return "", fmt.Errorf("%w %q: want day, week or month", ErrBadPeriod, s)
}

// Window is the span [From, To) a report of period p ending at now covers:
// the trailing 24 hours, 7 days, or the calendar month to date (in now's
// location), so a monthly report matches the budgets' month.
func (p Period) Window(now time.Time) (from, to time.Time) {
	switch p {
	case Week:
		return now.Add(-7 * 24 * time.Hour), now
	case Month:
		return monthStart(now), now
	default:
		return now.Add(-24 * time.Hour), now
	}
}

func monthStart(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, t.Location())
}

// Instance is one instance's life as far as billing goes.
type Instance struct {
	ID           string
	Workload     string
	Team         string
	Cloud        string
	Region       string
	Zone         string
	InstanceType string
	Capacity     string // "spot" or "on-demand"
	GPU          string
	GPUs         int
	// Start is when billing started (launch or registration); End when it
	// stopped, zero while the instance runs.
	Start time.Time
	End   time.Time
	// PricePerHour is what the instance is billed per hour (spot at the price
	// observed for its pool); OnDemandPerHour the on-demand price of the
	// same shape, for savings. Zero when the catalog does not know it.
	PricePerHour    float64
	OnDemandPerHour float64
	// LastHeartbeat is the agent's last heartbeat; zero if none.
	LastHeartbeat time.Time
	State         string
}

// SpendRow is spend recorded by a ledger (the autoscaler's), one row per
// instance, workload, team, cloud and day. When Inputs.Spend is nil the
// report estimates spend from Instances instead.
type SpendRow struct {
	Day      time.Time
	Workload string
	Team     string
	Cloud    string
	Cost     float64
	OnDemand float64
}

// Event is one recorded event (preemption notice, drain, launch, ...).
type Event struct {
	At       time.Time
	Kind     string
	Instance string
	Workload string
	// Pool is "cloud/zone/instance type/capacity" where known.
	Pool    string
	Message string
}

// Event kinds the report counts (fleet/instance names them; the fleet
// controller's own are prefixed "fleet."). Other kinds are counted under
// "other".
const (
	KindPreemption   = string(instance.EventPreemptionNotice)
	KindDrained      = string(instance.EventDrained)
	KindDrainFailed  = string(instance.EventDrainFailed)
	KindLaunched     = string(instance.EventLaunched)
	KindReplaced     = "replaced"
	KindLaunchFailed = "fleet.launch_failed"
)

// PricePoint is one observed price of a pool.
type PricePoint struct {
	Cloud        string
	Region       string
	Zone         string
	InstanceType string
	GPU          string
	At           time.Time
	Spot         float64
	OnDemand     float64
}

// Pool names the pool of a price point, as Event.Pool does.
func (p PricePoint) Pool() string {
	return p.Cloud + "/" + p.Zone + "/" + p.InstanceType
}

// Budget is a monthly budget of the policy.
type Budget struct {
	Name       string
	Team       string
	Workload   string
	MonthlyUSD float64
}

// Placement is the part of a plan placement the report shows.
type Placement struct {
	Workload      string
	Team          string
	Kind          string
	Where         string // "aws usw2-az3 p5e.48xlarge"
	Capacity      string
	GPU           string
	GPUs          int
	PricePerHour  float64
	ExpectedHours float64
	DeadlineHours float64
	ExpectedCost  float64
	OnDemand      float64
	// Pools the placement uses ("cloud/zone/instance type"), for price moves.
	Pools []string
}

// CatalogInfo says where prices come from and how fresh they are.
type CatalogInfo struct {
	Source     string
	ObservedAt time.Time
	Offers     int
	// LastRefresh is the last successful refresh; zero if none ran.
	LastRefresh time.Time
	// LastRefreshError is the last refresh's error, empty if it succeeded.
	LastRefreshError string
	// RefreshExpected says a refresh is configured, so a missing or old one
	// is a problem rather than a choice.
	RefreshExpected bool
}

// Inputs is everything a report is built from. The caller gathers it from
// the store or the broker API; Build does no I/O.
type Inputs struct {
	Now    time.Time
	Period Period
	// Policy names the policy the plan was made for.
	Policy     string
	Placements []Placement
	// PlanExpected and PlanOnDemand are the plan's totals over its horizon.
	PlanExpected float64
	PlanOnDemand float64
	Instances    []Instance
	// Spend is the ledger's rows; nil means "no ledger": estimate from
	// Instances.
	Spend   []SpendRow
	Events  []Event
	Prices  []PricePoint
	Budgets []Budget
	Catalog CatalogInfo
	// DashboardURL is the base URL of the web dashboard, for links; empty
	// for none.
	DashboardURL string
	Thresholds   Thresholds
}

// Thresholds tune what counts as notable. Zero fields take defaults.
type Thresholds struct {
	// PriceMove is the relative change of a pool's spot price that is
	// reported (default 0.20).
	PriceMove float64
	// DeadlineSlack: a job is at risk when its projected finish leaves less
	// than this fraction of its deadline (default 0.10).
	DeadlineSlack float64
	// StaleCatalog is the catalog age that counts as stale (default 7 days).
	StaleCatalog time.Duration
	// StaleRefresh is the refresh age that counts as stale when a refresh is
	// configured (default 24h).
	StaleRefresh time.Duration
	// SilentAgent is how long without heartbeat makes an agent silent
	// (default 5 minutes).
	SilentAgent time.Duration
	// StormCount preemptions in one pool within StormWindow make a storm
	// (defaults 5 in 1h).
	StormCount  int
	StormWindow time.Duration
	// FailingReplacements launch failures of one workload within the
	// period make "a replacement that keeps failing" (default 3).
	FailingReplacements int
	// BudgetLevels are the fractions of a budget that raise alerts
	// (default 0.5, 0.8, 1.0).
	BudgetLevels []float64
}

func (t Thresholds) withDefaults() Thresholds {
	if t.PriceMove <= 0 {
		t.PriceMove = 0.20
	}
	if t.DeadlineSlack <= 0 {
		t.DeadlineSlack = 0.10
	}
	if t.StaleCatalog <= 0 {
		t.StaleCatalog = 7 * 24 * time.Hour
	}
	if t.StaleRefresh <= 0 {
		t.StaleRefresh = 24 * time.Hour
	}
	if t.SilentAgent <= 0 {
		t.SilentAgent = 5 * time.Minute
	}
	if t.StormCount <= 0 {
		t.StormCount = 5
	}
	if t.StormWindow <= 0 {
		t.StormWindow = time.Hour
	}
	if t.FailingReplacements <= 0 {
		t.FailingReplacements = 3
	}
	if len(t.BudgetLevels) == 0 {
		t.BudgetLevels = []float64{0.5, 0.8, 1.0}
	}
	return t
}

// Report is a built report: plain data, rendered by Text, JSON and Blocks.
type Report struct {
	Period      Period    `json:"period"`
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	GeneratedAt time.Time `json:"generated_at"`
	Policy      string    `json:"policy,omitempty"`

	Spend Spend `json:"spend"`
	// Placements are the plan's placements, most expensive first.
	Placements   []Placement `json:"placements"`
	PlanExpected float64     `json:"plan_expected_cost"`
	PlanOnDemand float64     `json:"plan_on_demand_cost"`

	Activity     Activity       `json:"activity"`
	DeadlineRisk []DeadlineRisk `json:"deadline_risk"`
	Budgets      []BudgetStatus `json:"budgets"`
	PriceMoves   []PriceMove    `json:"price_moves"`
	Catalog      Freshness      `json:"catalog"`
	SilentAgents []string       `json:"silent_agents"`
	DashboardURL string         `json:"dashboard_url,omitempty"`
}

// Spend is what the period cost and saved.
type Spend struct {
	// Source is "ledger" or "estimated from agent uptime × catalog prices";
	// "none" when nothing ran.
	Source   string  `json:"source"`
	Total    float64 `json:"total"`
	OnDemand float64 `json:"on_demand_baseline"`
	Savings  float64 `json:"savings"`
	// SavingsPercent is Savings ÷ OnDemand × 100 (0 when nothing ran).
	SavingsPercent float64 `json:"savings_percent"`
	ByCloud        []Line  `json:"by_cloud"`
	ByTeam         []Line  `json:"by_team"`
	ByWorkload     []Line  `json:"by_workload"`
	ByDay          []Line  `json:"by_day"`
	// Unpriced counts instances whose price the catalog does not know.
	Unpriced int `json:"unpriced_instances"`
}

// Line is one group of spend.
type Line struct {
	Name     string  `json:"name"`
	Cost     float64 `json:"cost"`
	OnDemand float64 `json:"on_demand"`
}

// Activity counts what happened to instances in the period.
type Activity struct {
	Preemptions    int            `json:"preemptions"`
	Drains         int            `json:"drains"`
	DrainFailures  int            `json:"drain_failures"`
	Launches       int            `json:"launches"`
	Replacements   int            `json:"replacements"`
	LaunchFailures int            `json:"launch_failures"`
	PreemptedPools []Line         `json:"preempted_pools"` // Cost holds the count
	Other          map[string]int `json:"other,omitempty"`
}

// DeadlineRisk is a training or batch job that may miss its deadline.
type DeadlineRisk struct {
	Workload       string  `json:"workload"`
	ElapsedHours   float64 `json:"elapsed_hours"`
	ProjectedHours float64 `json:"projected_hours"`
	DeadlineHours  float64 `json:"deadline_hours"`
	Preemptions    int     `json:"preemptions"`
}

// BudgetStatus is one budget this month.
type BudgetStatus struct {
	Name       string  `json:"name"`
	MonthlyUSD float64 `json:"monthly_usd"`
	Spent      float64 `json:"spent"`
	// Forecast is spent + current burn rate × hours left in the month.
	Forecast    float64 `json:"forecast"`
	BurnPerHour float64 `json:"burn_per_hour"`
	SpentPct    float64 `json:"spent_percent"`
	ForecastPct float64 `json:"forecast_percent"`
}

// PriceMove is a pool whose spot price moved by more than the threshold.
type PriceMove struct {
	Pool      string  `json:"pool"`
	GPU       string  `json:"gpu,omitempty"`
	From      float64 `json:"from"`
	To        float64 `json:"to"`
	ChangePct float64 `json:"change_percent"`
}

// Freshness is the catalog's age and the last refresh.
type Freshness struct {
	Source           string    `json:"source"`
	ObservedAt       time.Time `json:"observed_at,omitzero"`
	AgeHours         float64   `json:"age_hours"`
	Offers           int       `json:"offers"`
	Stale            bool      `json:"stale"`
	LastRefresh      time.Time `json:"last_refresh,omitzero"`
	LastRefreshError string    `json:"last_refresh_error,omitempty"`
}

// Build computes a report from its inputs. It does no I/O and is
// deterministic for the same inputs.
func Build(in Inputs) Report {
	th := in.Thresholds.withDefaults()
	now := in.Now
	period := in.Period
	if period == "" {
		period = Day
	}
	from, to := period.Window(now)
	r := Report{Period: period, From: from, To: to, GeneratedAt: now, Policy: in.Policy,
		PlanExpected: round2(in.PlanExpected), PlanOnDemand: round2(in.PlanOnDemand), DashboardURL: in.DashboardURL}

	r.Spend = spendOf(in, from, to)
	r.Placements = append([]Placement(nil), in.Placements...)
	sort.SliceStable(r.Placements, func(i, j int) bool {
		if r.Placements[i].ExpectedCost != r.Placements[j].ExpectedCost {
			return r.Placements[i].ExpectedCost > r.Placements[j].ExpectedCost
		}
		return r.Placements[i].Workload < r.Placements[j].Workload
	})
	r.Activity = activityOf(in.Events, from, to)
	r.DeadlineRisk = deadlineRisks(in, th)
	r.Budgets = budgetsOf(in)
	r.PriceMoves = priceMoves(in, from, to, th)
	r.Catalog = freshnessOf(in.Catalog, now, th)
	r.SilentAgents = silentAgents(in.Instances, now, th)
	return r
}

func spendOf(in Inputs, from, to time.Time) Spend {
	rows := in.Spend
	sp := Spend{Source: "ledger"}
	if rows == nil {
		rows, sp.Unpriced = estimateSpend(in.Instances, from, to)
		sp.Source = "estimated from agent uptime × catalog prices"
	} else {
		var clipped []SpendRow
		for _, r := range rows {
			if !r.Day.Before(from.Truncate(24*time.Hour)) && r.Day.Before(to) {
				clipped = append(clipped, r)
			}
		}
		rows = clipped
	}
	if len(rows) == 0 {
		sp.Source = "none"
	}
	byCloud, byTeam, byWL, byDay := map[string]*Line{}, map[string]*Line{}, map[string]*Line{}, map[string]*Line{}
	add := func(m map[string]*Line, k string, r SpendRow) {
		if k == "" {
			k = "(none)"
		}
		l := m[k]
		if l == nil {
			l = &Line{Name: k}
			m[k] = l
		}
		l.Cost += r.Cost
		l.OnDemand += r.OnDemand
	}
	for _, r := range rows {
		sp.Total += r.Cost
		sp.OnDemand += r.OnDemand
		add(byCloud, r.Cloud, r)
		add(byTeam, r.Team, r)
		add(byWL, r.Workload, r)
		add(byDay, r.Day.Format("2006-01-02"), r)
	}
	sp.Total, sp.OnDemand = round2(sp.Total), round2(sp.OnDemand)
	sp.Savings = round2(sp.OnDemand - sp.Total)
	if sp.OnDemand > 0 {
		sp.SavingsPercent = round1(100 * sp.Savings / sp.OnDemand)
	}
	sp.ByCloud, sp.ByTeam, sp.ByWorkload = sortedLines(byCloud, true), sortedLines(byTeam, true), sortedLines(byWL, true)
	if len(rows) > 0 {
		// Every day of the window gets a bar, zero or not, so gaps show.
		for d := from.UTC().Truncate(24 * time.Hour); d.Before(to); d = d.Add(24 * time.Hour) {
			if k := d.Format("2006-01-02"); byDay[k] == nil {
				byDay[k] = &Line{Name: k}
			}
		}
	}
	sp.ByDay = sortedLines(byDay, false)
	return sp
}

// estimateSpend turns instance lifetimes into per-day spend rows with the
// ledger's billing rules, clipped to the window.
func estimateSpend(insts []Instance, from, to time.Time) ([]SpendRow, int) {
	var rows []SpendRow
	unpriced := 0
	for _, in := range insts {
		s, e, ok := overlap(in.Start, in.End, from, to)
		if !ok {
			continue
		}
		if in.PricePerHour <= 0 {
			unpriced++
			continue
		}
		u := ledger.Usage{Instance: in.ID, Workload: in.Workload, Team: in.Team, Cloud: in.Cloud, Capacity: in.Capacity,
			Start: s, End: e, Price: in.PricePerHour, OnDemand: in.OnDemandPerHour}
		for _, en := range ledger.Entries(u, to) {
			rows = append(rows, SpendRow{Day: en.Day, Workload: en.Workload, Team: en.Team, Cloud: en.Cloud, Cost: en.Cost, OnDemand: en.OnDemand})
		}
	}
	return rows, unpriced
}

func sortedLines(m map[string]*Line, byCost bool) []Line {
	out := make([]Line, 0, len(m))
	for _, l := range m {
		out = append(out, Line{Name: l.Name, Cost: round2(l.Cost), OnDemand: round2(l.OnDemand)})
	}
	sort.Slice(out, func(i, j int) bool {
		if byCost && out[i].Cost != out[j].Cost {
			return out[i].Cost > out[j].Cost
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func activityOf(evs []Event, from, to time.Time) Activity {
	a := Activity{}
	pools := map[string]*Line{}
	for _, e := range evs {
		if e.At.Before(from) || !e.At.Before(to) {
			continue
		}
		switch e.Kind {
		case KindPreemption:
			a.Preemptions++
			k := e.Pool
			if k == "" {
				k = "(unknown pool)"
			}
			if pools[k] == nil {
				pools[k] = &Line{Name: k}
			}
			pools[k].Cost++
		case KindDrained:
			a.Drains++
		case KindDrainFailed:
			a.DrainFailures++
		case KindLaunched:
			a.Launches++
		case KindReplaced:
			a.Replacements++
		case KindLaunchFailed:
			a.LaunchFailures++
		default:
			if a.Other == nil {
				a.Other = map[string]int{}
			}
			a.Other[e.Kind]++
		}
	}
	a.PreemptedPools = sortedLines(pools, true)
	return a
}

func deadlineRisks(in Inputs, th Thresholds) []DeadlineRisk {
	starts := map[string]time.Time{}
	for _, i := range in.Instances {
		if i.Workload == "" || i.Start.IsZero() {
			continue
		}
		if s, ok := starts[i.Workload]; !ok || i.Start.Before(s) {
			starts[i.Workload] = i.Start
		}
	}
	preempt := map[string]int{}
	for _, e := range in.Events {
		if e.Kind == KindPreemption && e.Workload != "" {
			preempt[e.Workload]++
		}
	}
	var out []DeadlineRisk
	for _, p := range in.Placements {
		if p.Kind == "inference" || p.DeadlineHours <= 0 {
			continue
		}
		start, running := starts[p.Workload]
		elapsed := 0.0
		if running {
			elapsed = in.Now.Sub(start).Hours()
		}
		// Without progress reports the projection is the plan's expected
		// duration, or the time already spent when that is longer.
		projected := math.Max(p.ExpectedHours, elapsed)
		if projected > p.DeadlineHours*(1-th.DeadlineSlack) {
			out = append(out, DeadlineRisk{Workload: p.Workload, ElapsedHours: round1(elapsed),
				ProjectedHours: round1(projected), DeadlineHours: p.DeadlineHours, Preemptions: preempt[p.Workload]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Workload < out[j].Workload })
	return out
}

// budgetsOf computes each budget this month with the ledger's rule
// (fleet/ledger.BudgetStatus): spent from the ledger's rows (or the
// estimate), burn from what runs now, forecast to the month's end.
func budgetsOf(in Inputs) []BudgetStatus {
	if len(in.Budgets) == 0 {
		return nil
	}
	ms := ledger.MonthStart(in.Now)
	rows := in.Spend
	if rows == nil {
		rows, _ = estimateSpend(in.Instances, ms, in.Now)
	}
	entries := make([]ledger.Entry, len(rows))
	for i, r := range rows {
		entries[i] = ledger.Entry{Day: r.Day, Workload: r.Workload, Team: r.Team, Cloud: r.Cloud, Cost: r.Cost, OnDemand: r.OnDemand}
	}
	var running []ledger.Usage
	for _, i := range in.Instances {
		if i.End.IsZero() && !i.Start.After(in.Now) {
			running = append(running, ledger.Usage{Workload: i.Workload, Team: i.Team, Price: i.PricePerHour})
		}
	}
	var out []BudgetStatus
	for _, b := range in.Budgets {
		st := ledger.BudgetStatus(ledger.Budget{Name: b.Name, Team: b.Team, Workload: b.Workload, MonthlyUSD: b.MonthlyUSD}, entries, running, in.Now, nil)
		out = append(out, BudgetStatus{Name: b.Name, MonthlyUSD: b.MonthlyUSD, Spent: round2(st.Spent), Forecast: round2(st.Forecast),
			BurnPerHour: round2(st.BurnPerHour), SpentPct: round1(st.SpentPct), ForecastPct: round1(st.ForecastPct)})
	}
	return out
}

func priceMoves(in Inputs, from, to time.Time, th Thresholds) []PriceMove {
	used := map[string]bool{}
	for _, p := range in.Placements {
		for _, pool := range p.Pools {
			used[pool] = true
		}
	}
	type span struct{ base, cur PricePoint }
	spans := map[string]*span{}
	// The baseline is the latest price at or before the window's start (or
	// the earliest within it); the current price is the latest in the window.
	for _, pp := range in.Prices {
		k := pp.Pool()
		if (len(used) > 0 && !used[k]) || pp.Spot <= 0 || pp.At.After(to) {
			continue
		}
		s := spans[k]
		if s == nil {
			spans[k] = &span{base: pp, cur: pp}
			continue
		}
		baseBefore := !s.base.At.After(from)
		switch {
		case !pp.At.After(from) && (!baseBefore || pp.At.After(s.base.At)):
			s.base = pp
		case pp.At.After(from) && !baseBefore && pp.At.Before(s.base.At):
			s.base = pp
		}
		if pp.At.After(s.cur.At) {
			s.cur = pp
		}
	}
	var out []PriceMove
	for k, s := range spans {
		if !s.cur.At.After(s.base.At) || !s.cur.At.After(from) {
			continue
		}
		ch := (s.cur.Spot - s.base.Spot) / s.base.Spot
		if math.Abs(ch) >= th.PriceMove {
			out = append(out, PriceMove{Pool: k, GPU: s.cur.GPU, From: s.base.Spot, To: s.cur.Spot, ChangePct: round1(100 * ch)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if math.Abs(out[i].ChangePct) != math.Abs(out[j].ChangePct) {
			return math.Abs(out[i].ChangePct) > math.Abs(out[j].ChangePct)
		}
		return out[i].Pool < out[j].Pool
	})
	return out
}

func freshnessOf(c CatalogInfo, now time.Time, th Thresholds) Freshness {
	f := Freshness{Source: c.Source, ObservedAt: c.ObservedAt, Offers: c.Offers, LastRefresh: c.LastRefresh,
		LastRefreshError: c.LastRefreshError}
	if !c.ObservedAt.IsZero() {
		f.AgeHours = round1(now.Sub(c.ObservedAt).Hours())
		f.Stale = now.Sub(c.ObservedAt) > th.StaleCatalog
	}
	return f
}

func silentAgents(insts []Instance, now time.Time, th Thresholds) []string {
	var out []string
	for _, i := range insts {
		if !i.End.IsZero() || i.State == "drained" || i.State == "terminated" || i.State == "gone" {
			continue
		}
		last := i.LastHeartbeat
		if last.IsZero() {
			last = i.Start
		}
		if !last.IsZero() && now.Sub(last) > th.SilentAgent {
			out = append(out, i.ID)
		}
	}
	sort.Strings(out)
	return out
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
func round1(x float64) float64 { return math.Round(x*10) / 10 }

// ForTeam narrows inputs to one team: its placements, instances, events,
// spend and budgets. Prices and the catalog stay as they are.
func ForTeam(in Inputs, team string) Inputs {
	out := in
	wl := map[string]bool{}
	out.Placements = nil
	for _, p := range in.Placements {
		if p.Team == team {
			out.Placements = append(out.Placements, p)
			wl[p.Workload] = true
		}
	}
	out.Instances = nil
	for _, i := range in.Instances {
		if i.Team == team {
			out.Instances = append(out.Instances, i)
			wl[i.Workload] = true
		}
	}
	if in.Spend != nil {
		out.Spend = []SpendRow{}
		for _, r := range in.Spend {
			if r.Team == team {
				out.Spend = append(out.Spend, r)
			}
		}
	}
	out.Events = nil
	for _, e := range in.Events {
		if wl[e.Workload] {
			out.Events = append(out.Events, e)
		}
	}
	out.Budgets = nil
	for _, b := range in.Budgets {
		if b.Team == team {
			out.Budgets = append(out.Budgets, b)
		}
	}
	out.PlanExpected, out.PlanOnDemand = 0, 0
	for _, p := range out.Placements {
		out.PlanExpected += p.ExpectedCost
		out.PlanOnDemand += p.OnDemand
	}
	return out
}

// overlap clips [s, e) to [from, to); e zero means "still running" (to).
func overlap(s, e, from, to time.Time) (time.Time, time.Time, bool) {
	if e.IsZero() || e.After(to) {
		e = to
	}
	if s.Before(from) {
		s = from
	}
	return s, e, e.After(s)
}
