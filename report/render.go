package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// Title is the report's one-line title.
func (r Report) Title() string {
	switch r.Period {
	case Week:
		return "gpubroker weekly report"
	case Month:
		return "gpubroker monthly report · " + r.To.Format("January 2006")
	}
	return "gpubroker daily report"
}

// Window is the span the report covers, for humans.
func (r Report) Window() string {
	return r.From.UTC().Format("2006-01-02 15:04") + " – " + r.To.UTC().Format("2006-01-02 15:04") + " UTC"
}

// JSON writes the report as indented JSON.
func JSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Text writes the report for a terminal.
func Text(w io.Writer, r Report) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "%s, %s\n\n", r.Title(), r.Window())
	sp := r.Spend
	if sp.Source == "none" {
		fmt.Fprintf(b, "Spend: nothing ran in this period.\n")
	} else {
		fmt.Fprintf(b, "Spend: %s vs all-on-demand %s: saved %s (%s) — %s\n", Money(sp.Total), Money(sp.OnDemand),
			Money(sp.Savings), Pct(sp.SavingsPercent), sp.Source)
		if sp.Unpriced > 0 {
			fmt.Fprintf(b, "  %s without a catalog price (not counted)\n", Plural(sp.Unpriced, "instance", "instances"))
		}
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
		for _, g := range []struct {
			name  string
			lines []Line
		}{{"cloud", sp.ByCloud}, {"team", sp.ByTeam}, {"workload", sp.ByWorkload}} {
			fmt.Fprintf(tw, "  BY %s\tSPEND\tON-DEMAND\n", strings.ToUpper(g.name))
			for _, l := range g.lines {
				fmt.Fprintf(tw, "  %s\t%s\t%s\n", l.Name, Money(l.Cost), Money(l.OnDemand))
			}
		}
		_ = tw.Flush()
	}
	b.WriteString("\n")
	if len(r.Placements) == 0 {
		b.WriteString("Plan: no plan yet.\n")
	} else {
		fmt.Fprintf(b, "Plan (%s): expected %s vs all-on-demand %s\n", r.Policy, Money(r.PlanExpected), Money(r.PlanOnDemand))
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  WORKLOAD\tWHERE\tCAPACITY\tGPUS\t$/HOUR\tEXP COST\n")
		for _, p := range r.Placements {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d×%s\t%.2f\t%s\n", p.Workload, p.Where, p.Capacity, p.GPUs, p.GPU, p.PricePerHour, Money(p.ExpectedCost))
		}
		_ = tw.Flush()
	}
	a := r.Activity
	fmt.Fprintf(b, "\nActivity: %s, %s (%d failed), %s, %s, %s\n",
		Plural(a.Preemptions, "preemption", "preemptions"), Plural(a.Drains, "drain", "drains"), a.DrainFailures,
		Plural(a.Launches, "launch", "launches"), Plural(a.Replacements, "replacement", "replacements"),
		Plural(a.LaunchFailures, "failed launch", "failed launches"))
	for _, p := range a.PreemptedPools {
		fmt.Fprintf(b, "  %s: %s\n", p.Name, Plural(int(p.Cost), "preemption", "preemptions"))
	}
	if len(r.DeadlineRisk) > 0 {
		b.WriteString("\nDeadline risk:\n")
		for _, d := range r.DeadlineRisk {
			fmt.Fprintf(b, "  %s: projected %.1fh against a %.0fh deadline (%.1fh elapsed, %s)\n", d.Workload,
				d.ProjectedHours, d.DeadlineHours, d.ElapsedHours, Plural(d.Preemptions, "preemption", "preemptions"))
		}
	}
	if len(r.Budgets) > 0 {
		b.WriteString("\nBudgets this month:\n")
		for _, bs := range r.Budgets {
			fmt.Fprintf(b, "  %s: spent %s of %s (%s), forecast %s (%s)\n", bs.Name, Money(bs.Spent), Money(bs.MonthlyUSD),
				Pct(bs.SpentPct), Money(bs.Forecast), Pct(bs.ForecastPct))
		}
	}
	if len(r.PriceMoves) > 0 {
		b.WriteString("\nPrice moves (spot):\n")
		for _, m := range r.PriceMoves {
			fmt.Fprintf(b, "  %s: $%.4f → $%.4f (%+.1f%%)\n", m.Pool, m.From, m.To, m.ChangePct)
		}
	}
	if len(r.SilentAgents) > 0 {
		fmt.Fprintf(b, "\nSilent agents: %s\n", strings.Join(r.SilentAgents, ", "))
	}
	fmt.Fprintf(b, "\nCatalog: %s\n", r.Catalog.describe())
	if r.DashboardURL != "" {
		fmt.Fprintf(b, "Dashboard: %s\n", r.DashboardURL)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (f Freshness) describe() string {
	s := f.Source
	if s == "" {
		s = "unknown source"
	}
	if !f.ObservedAt.IsZero() {
		s += fmt.Sprintf(", prices observed %s (%s old)", f.ObservedAt.UTC().Format("2006-01-02"), Age(f.AgeHours))
	}
	if f.Offers > 0 {
		s += ", " + Plural(f.Offers, "offer", "offers")
	}
	if f.Stale {
		s += " — STALE"
	}
	if !f.LastRefresh.IsZero() {
		s += ", last refresh " + f.LastRefresh.UTC().Format(time.RFC3339)
	}
	if f.LastRefreshError != "" {
		s += ", last refresh failed: " + f.LastRefreshError
	}
	return s
}

// Money formats dollars: $1,234 above 1,000, cents below.
func Money(x float64) string {
	neg := x < 0
	x = math.Abs(x)
	var s string
	if x >= 1000 {
		s = commas(int64(math.Round(x)))
	} else {
		s = fmt.Sprintf("%.2f", x)
	}
	if neg {
		return "-$" + s
	}
	return "$" + s
}

func commas(n int64) string {
	s := fmt.Sprint(n)
	var out []byte
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, c)
	}
	return string(out)
}

// Pct formats a percentage with one decimal.
func Pct(x float64) string { return fmt.Sprintf("%.1f%%", x) }

// Plural writes "1 drain" or "3 drains".
func Plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// Age formats hours as "13h" or "4.2d".
func Age(h float64) string {
	if h < 48 {
		return fmt.Sprintf("%.0fh", h)
	}
	return fmt.Sprintf("%.1fd", h/24)
}
