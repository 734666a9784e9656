// Package ledger turns instance lifetimes into spend: billed time per the
// cloud's rules × the price of the instance's pool, split per UTC day, next
// to what the same instance-hours would cost on demand. It also forecasts
// budgets (spent + burn rate × time left in the month) and says which
// threshold a budget has crossed. Pure functions over plain data; the broker's
// ledger job stores the entries and the report, API and metrics read them.
package ledger

import (
	"math"
	"sort"
	"time"
)

// Usage is one instance's life as billing sees it.
type Usage struct {
	Instance     string
	Workload     string
	Team         string
	Cloud        string
	Region       string
	Zone         string
	InstanceType string
	Capacity     string
	// Start is when billing started (launch); End when it stopped, zero
	// while the instance runs.
	Start time.Time
	End   time.Time
	// Price is the hourly price billed (spot at the price observed for its
	// pool); OnDemand the on-demand price of the same shape. Zero Price
	// means the catalog does not know it: no entry is made.
	Price    float64
	OnDemand float64
}

// Entry is one instance's spend on one UTC day.
type Entry struct {
	Day      time.Time
	Instance string
	Workload string
	Team     string
	Cloud    string
	Capacity string
	// Seconds is the billed time that day.
	Seconds  float64
	Cost     float64
	OnDemand float64
}

// BilledSeconds is the billed time of [start, end) on a cloud: per second
// with a one-minute minimum on AWS and GCP (Linux), per started minute on
// Azure.
func BilledSeconds(cloud string, start, end time.Time) float64 {
	d := end.Sub(start)
	if d <= 0 {
		return 0
	}
	if cloud == "azure" {
		return math.Ceil(d.Minutes()) * 60
	}
	return max(d.Seconds(), 60)
}

// Entries splits a usage into per-day entries up to until (for a running
// instance). The billing granularity applies to the whole life; each day
// gets its share of it, so the days add up to the bill.
func Entries(u Usage, until time.Time) []Entry {
	return AppendEntries(nil, u, until)
}

// AppendEntries appends Entries(u, until) to dst: callers that only sum
// the entries (a simulation's hourly spend over every live instance) reuse
// one buffer.
func AppendEntries(dst []Entry, u Usage, until time.Time) []Entry {
	end := u.End
	if end.IsZero() || end.After(until) {
		end = until
	}
	if u.Price <= 0 || !end.After(u.Start) {
		return dst
	}
	od := u.OnDemand
	if od < u.Price {
		// A missing or implausible on-demand price never counts as a saving.
		od = u.Price
	}
	raw := end.Sub(u.Start).Seconds()
	scale := BilledSeconds(u.Cloud, u.Start, end) / raw
	out := dst
	for day := u.Start.UTC().Truncate(24 * time.Hour); day.Before(end); day = day.Add(24 * time.Hour) {
		s, e := maxTime(u.Start, day), minTime(end, day.Add(24*time.Hour))
		if !e.After(s) {
			continue
		}
		sec := e.Sub(s).Seconds() * scale
		out = append(out, Entry{Day: day, Instance: u.Instance, Workload: u.Workload, Team: u.Team, Cloud: u.Cloud,
			Capacity: u.Capacity, Seconds: sec, Cost: sec / 3600 * u.Price, OnDemand: sec / 3600 * od})
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Budget is a monthly budget over a team and/or workload (empty: all).
type Budget struct {
	Name       string
	Team       string
	Workload   string
	MonthlyUSD float64
}

// Matches says whether spend of a workload and team falls under b.
func (b Budget) Matches(workload, team string) bool {
	return (b.Team == "" || b.Team == team) && (b.Workload == "" || b.Workload == workload)
}

// Status is a budget this month.
type Status struct {
	Budget
	Month       time.Time
	Spent       float64
	BurnPerHour float64
	// Forecast is Spent + BurnPerHour × hours left in the month.
	Forecast    float64
	SpentPct    float64
	ForecastPct float64
	// Level is the highest threshold Spent has crossed (0 if none).
	Level float64
}

// DefaultLevels are the budget thresholds that raise events: 50, 80, 100%.
var DefaultLevels = []float64{0.5, 0.8, 1.0}

// MonthStart is the first instant of t's month in UTC.
func MonthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// BudgetStatus computes b this month from the month's entries and the
// usages running at now (their prices are the burn rate).
func BudgetStatus(b Budget, entries []Entry, running []Usage, now time.Time, levels []float64) Status {
	if len(levels) == 0 {
		levels = DefaultLevels
	}
	ms := MonthStart(now)
	st := Status{Budget: b, Month: ms}
	for _, e := range entries {
		if !e.Day.Before(ms) && e.Day.Before(now) && b.Matches(e.Workload, e.Team) {
			st.Spent += e.Cost
		}
	}
	for _, u := range running {
		if u.End.IsZero() && b.Matches(u.Workload, u.Team) {
			st.BurnPerHour += u.Price
		}
	}
	left := ms.AddDate(0, 1, 0).Sub(now).Hours()
	st.Forecast = st.Spent + st.BurnPerHour*max(left, 0)
	if b.MonthlyUSD > 0 {
		st.SpentPct = 100 * st.Spent / b.MonthlyUSD
		st.ForecastPct = 100 * st.Forecast / b.MonthlyUSD
		ls := append([]float64(nil), levels...)
		sort.Float64s(ls)
		for _, l := range ls {
			if st.Spent >= l*b.MonthlyUSD {
				st.Level = l
			}
		}
	}
	return st
}
