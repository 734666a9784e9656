package report

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// AlertKind says what an alert is about; channels can be routed per kind.
type AlertKind string

// Alert kinds.
const (
	AlertBudget          AlertKind = "budget"
	AlertPreemptionStorm AlertKind = "preemption_storm"
	AlertReplacement     AlertKind = "replacement_failing"
	AlertDeadline        AlertKind = "deadline_risk"
	AlertRefresh         AlertKind = "price_refresh"
	AlertAgentSilent     AlertKind = "agent_silent"
)

// AlertKinds lists every kind, for configuration checks.
func AlertKinds() []AlertKind {
	return []AlertKind{AlertBudget, AlertPreemptionStorm, AlertReplacement, AlertDeadline, AlertRefresh, AlertAgentSilent}
}

// Alert is one condition that holds now. Key identifies the condition: the
// same condition evaluated again gets the same key, so it is sent once.
type Alert struct {
	Key      string    `json:"key"`
	Kind     AlertKind `json:"kind"`
	Team     string    `json:"team,omitempty"`
	Severity string    `json:"severity"` // "warning" or "critical"
	Title    string    `json:"title"`
	Detail   string    `json:"detail"`
}

// Evaluate returns every alert condition that holds for the inputs at
// in.Now. Budget keys include the month, so a new month alerts afresh.
func Evaluate(in Inputs) []Alert {
	th := in.Thresholds.withDefaults()
	r := Build(Inputs{Now: in.Now, Period: Day, Placements: in.Placements, Instances: in.Instances,
		Spend: in.Spend, Events: in.Events, Budgets: in.Budgets, Catalog: in.Catalog, Thresholds: in.Thresholds})
	var out []Alert
	month := in.Now.Format("2006-01")
	teams := map[string]string{}
	for _, b := range in.Budgets {
		teams[b.Name] = b.Team
	}
	for _, b := range r.Budgets {
		if b.MonthlyUSD <= 0 {
			continue
		}
		// The highest level crossed is the condition; lower ones are implied.
		var crossed float64
		for _, lvl := range th.BudgetLevels {
			if b.Spent >= lvl*b.MonthlyUSD && lvl > crossed {
				crossed = lvl
			}
		}
		if crossed > 0 {
			sev := "warning"
			if crossed >= 1 {
				sev = "critical"
			}
			out = append(out, Alert{Key: fmt.Sprintf("budget/%s/%s/%.0f", b.Name, month, crossed*100), Kind: AlertBudget,
				Team: teams[b.Name], Severity: sev,
				Title:  fmt.Sprintf("Budget %s at %s of %s", b.Name, Pct(b.SpentPct), Money(b.MonthlyUSD)),
				Detail: fmt.Sprintf("Spent %s this month; forecast %s (%s) at %s/h.", Money(b.Spent), Money(b.Forecast), Pct(b.ForecastPct), Money(b.BurnPerHour))})
		}
		if b.ForecastPct >= 100 && b.SpentPct < 100 {
			out = append(out, Alert{Key: fmt.Sprintf("budget-forecast/%s/%s", b.Name, month), Kind: AlertBudget,
				Team: teams[b.Name], Severity: "warning",
				Title:  fmt.Sprintf("Budget %s forecast to reach %s", b.Name, Pct(b.ForecastPct)),
				Detail: fmt.Sprintf("Spent %s of %s; at %s/h the month ends at %s.", Money(b.Spent), Money(b.MonthlyUSD), Money(b.BurnPerHour), Money(b.Forecast))})
		}
	}
	// Preemption storms: N notices in one pool within the window.
	perPool := map[string]int{}
	for _, e := range in.Events {
		if e.Kind == KindPreemption && !e.At.Before(in.Now.Add(-th.StormWindow)) && !e.At.After(in.Now) {
			perPool[e.Pool]++
		}
	}
	for pool, n := range perPool {
		if n >= th.StormCount {
			name := pool
			if name == "" {
				name = "(unknown pool)"
			}
			out = append(out, Alert{Key: "storm/" + pool, Kind: AlertPreemptionStorm, Severity: "warning",
				Title:  fmt.Sprintf("Preemption storm in %s", name),
				Detail: fmt.Sprintf("%d preemption notices in the last %s.", n, th.StormWindow)})
		}
	}
	// Replacements that keep failing: launch failures per workload in the
	// storm window without a successful launch after the last one.
	type wl struct {
		fails       int
		lastFail    time.Time
		lastSuccess time.Time
	}
	wls := map[string]*wl{}
	for _, e := range in.Events {
		if e.Workload == "" || e.At.Before(in.Now.Add(-24*time.Hour)) {
			continue
		}
		w := wls[e.Workload]
		if w == nil {
			w = &wl{}
			wls[e.Workload] = w
		}
		switch e.Kind {
		case KindLaunchFailed:
			w.fails++
			if e.At.After(w.lastFail) {
				w.lastFail = e.At
			}
		case KindLaunched, KindReplaced:
			if e.At.After(w.lastSuccess) {
				w.lastSuccess = e.At
			}
		}
	}
	for name, w := range wls {
		if w.fails >= th.FailingReplacements && w.lastFail.After(w.lastSuccess) {
			out = append(out, Alert{Key: "replacement/" + name, Kind: AlertReplacement, Severity: "critical",
				Title:  fmt.Sprintf("Replacement for %s keeps failing", name),
				Detail: fmt.Sprintf("%d failed launches in the last 24h, none succeeded since.", w.fails)})
		}
	}
	for _, d := range r.DeadlineRisk {
		out = append(out, Alert{Key: "deadline/" + d.Workload, Kind: AlertDeadline, Severity: "warning",
			Title: fmt.Sprintf("%s may miss its deadline", d.Workload),
			Detail: fmt.Sprintf("Projected %.1fh against a %.0fh deadline (%.1fh elapsed, %d preemptions).",
				d.ProjectedHours, d.DeadlineHours, d.ElapsedHours, d.Preemptions)})
	}
	c := in.Catalog
	if c.LastRefreshError != "" {
		out = append(out, Alert{Key: "refresh/failed", Kind: AlertRefresh, Severity: "warning",
			Title: "Price refresh failed", Detail: clip(c.LastRefreshError, 500)})
	} else if c.RefreshExpected && (c.LastRefresh.IsZero() || in.Now.Sub(c.LastRefresh) > th.StaleRefresh) {
		d := "No refresh has succeeded yet."
		if !c.LastRefresh.IsZero() {
			d = fmt.Sprintf("Last successful refresh %s ago.", in.Now.Sub(c.LastRefresh).Round(time.Minute))
		}
		out = append(out, Alert{Key: "refresh/stale", Kind: AlertRefresh, Severity: "warning", Title: "Prices are stale", Detail: d})
	}
	for _, id := range r.SilentAgents {
		out = append(out, Alert{Key: "agent/" + id, Kind: AlertAgentSilent, Severity: "warning",
			Title:  fmt.Sprintf("Agent on %s is silent", id),
			Detail: fmt.Sprintf("No heartbeat for more than %s.", th.SilentAgent)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// AlertStore remembers which alert conditions are active, so each is sent
// once, and again only after it cleared. *store.Broker implements it.
type AlertStore interface {
	// ActiveAlerts returns the keys of the conditions recorded as active.
	ActiveAlerts(ctx context.Context) ([]string, error)
	// ActivateAlert records key as active; it returns false when it already
	// was (another replica or an earlier run sent it), so exactly one caller
	// sends each activation.
	ActivateAlert(ctx context.Context, key, kind string, now time.Time) (bool, error)
	// ClearAlert records key as no longer active.
	ClearAlert(ctx context.Context, key string, now time.Time) error
}

// Dedupe returns the alerts to send now: those whose condition was not
// active before. Conditions that no longer hold are cleared, so they alert
// again if they return.
func Dedupe(ctx context.Context, st AlertStore, current []Alert, now time.Time) ([]Alert, error) {
	active, err := st.ActiveAlerts(ctx)
	if err != nil {
		return nil, fmt.Errorf("report: active alerts: %w", err)
	}
	holds := map[string]bool{}
	for _, a := range current {
		holds[a.Key] = true
	}
	for _, k := range active {
		if !holds[k] {
			if err := st.ClearAlert(ctx, k, now); err != nil {
				return nil, fmt.Errorf("report: clear alert %s: %w", k, err)
			}
		}
	}
	var send []Alert
	for _, a := range current {
		fresh, err := st.ActivateAlert(ctx, a.Key, string(a.Kind), now)
		if err != nil {
			return nil, fmt.Errorf("report: activate alert %s: %w", a.Key, err)
		}
		if fresh {
			send = append(send, a)
		}
	}
	return send, nil
}

// AlertMessage renders one alert as a short Block Kit message.
func AlertMessage(a Alert, dashboardURL string) Message {
	icon := ":warning:"
	if a.Severity == "critical" {
		icon = ":rotating_light:"
	}
	bl := []slack.Block{
		section(icon + " *" + Escape(a.Title) + "*\n" + Escape(a.Detail)),
	}
	ctx := []string{"gpubroker alert · " + strings.ReplaceAll(string(a.Kind), "_", " ")}
	if l := link(dashboardURL, alertPage(a.Kind), "open dashboard"); l != "" {
		ctx = append(ctx, l)
	}
	bl = append(bl, contextBlock(ctx...))
	return Message{Text: a.Title, Blocks: bl}
}

func alertPage(k AlertKind) string {
	switch k {
	case AlertBudget:
		return "/budgets"
	case AlertRefresh:
		return "/prices"
	case AlertAgentSilent, AlertReplacement:
		return "/fleet"
	case AlertDeadline:
		return "/plan"
	}
	return "/events"
}
