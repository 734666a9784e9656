package fleetsim

import (
	"fmt"
	"io"
	"math"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/gpubroker/gpubroker/fleet"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/providers/fake"
)

// WorkloadReport is one workload's outcome.
type WorkloadReport struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// CostUSD is what its instances cost (fleet/ledger billing);
	// OnDemandUSD what the same work costs all on demand: for a job the
	// first plan's on-demand baseline (the cheapest on-demand placement
	// running it once), for a service the replicas its load needed at each
	// moment at the on-demand price of where its first plan put it (hedge
	// and spare replicas are not work, so over-provisioning shows).
	CostUSD     float64 `json:"cost_usd"`
	OnDemandUSD float64 `json:"on_demand_usd"`
	Ratio       float64 `json:"cost_vs_on_demand"`
	// InstanceOnDemandUSD is the same instance-hours at on-demand prices.
	InstanceOnDemandUSD float64 `json:"instance_hours_on_demand_usd"`
	InstanceHours       float64 `json:"instance_hours"`
	// Jobs: when the work finished (hours after start; 0 when it did not),
	// the deadline (hours; 0 none) and whether it was missed (finished
	// late, or unfinished at the end with the deadline inside the run).
	FinishHours   float64 `json:"finish_hours,omitempty"`
	DeadlineHours float64 `json:"deadline_hours,omitempty"`
	Finished      bool    `json:"finished"`
	Missed        bool    `json:"missed"`
	// Services: the share of time with at least the replicas the load
	// needed ready.
	TimeAtTarget float64 `json:"time_at_target,omitempty"`
	Launches     int     `json:"launches"`
	Preemptions  int     `json:"preemptions"`
	// Migrations are launches of a slot into another pool than its last.
	Migrations int `json:"migrations"`
	// APICalls are the launch and terminate calls for its instances.
	APICalls int `json:"api_calls"`
}

// Totals add the workloads up; APICalls include the listings.
type Totals struct {
	CostUSD        float64        `json:"cost_usd"`
	OnDemandUSD    float64        `json:"on_demand_usd"`
	Ratio          float64        `json:"cost_vs_on_demand"`
	Jobs           int            `json:"jobs"`
	Finished       int            `json:"finished"`
	DeadlineMisses int            `json:"deadline_misses"`
	Services       int            `json:"services"`
	TimeAtTarget   float64        `json:"time_at_target"`
	Launches       int            `json:"launches"`
	Preemptions    int            `json:"preemptions"`
	Migrations     int            `json:"migrations"`
	APICalls       int            `json:"api_calls"`
	APICallsByKind map[string]int `json:"api_calls_by_kind"`
	Passes         int            `json:"reconcile_passes"`
}

// PoolTrace says which trace drove a pool the fleet used.
type PoolTrace struct {
	Pool   string `json:"pool"`
	Trace  string `json:"trace"`
	Offset int    `json:"offset_ticks"`
}

// Point is the chart's sample: spend so far, ready replicas, live
// instances.
type Point struct {
	At        time.Time `json:"at"`
	SpendUSD  float64   `json:"spend_usd"`
	Replicas  int       `json:"replicas"`
	Instances int       `json:"instances"`
}

// Report is a fleet simulation's outcome.
type Report struct {
	Start     time.Time        `json:"start"`
	Days      float64          `json:"days"`
	Seed      uint64           `json:"seed"`
	Traces    int              `json:"traces"`
	Pools     []PoolTrace      `json:"pools"`
	Workloads []WorkloadReport `json:"workloads"`
	Total     Totals           `json:"total"`
	// Budgets are the policy's budgets, month by month (none: omitted).
	Budgets []BudgetReport `json:"budgets,omitempty"`
	Series  []Point        `json:"-"`
}

func round(f float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(f*p) / p
}

func (s *Sim) report(end time.Time) *Report {
	r := &Report{Start: s.cfg.Start, Days: round(s.cfg.Duration.Hours()/24, 3), Seed: s.cfg.Seed, Traces: len(s.cfg.Traces), Series: s.series}
	// Instances still up at the end are billed to the end.
	for _, in := range s.live {
		s.account(in, end)
	}
	for w, a := range s.acc {
		if st := s.stats[w]; st != nil {
			st.CostUSD, st.InstanceOnDemandUSD, st.InstanceHours = float64(a.cost)/1e6, float64(a.od)/1e6, a.life.Hours()
		}
	}
	used := map[providers.PoolKey]bool{}
	for _, in := range s.insts {
		if in.pool.Capacity == pricing.Spot {
			used[in.pool] = true
		}
	}
	for k := range used {
		name, off := s.computes[k.Cloud].TraceOf(k)
		r.Pools = append(r.Pools, PoolTrace{Pool: fmt.Sprintf("%s/%s/%s", k.Cloud, k.Zone, k.InstanceType), Trace: name, Offset: off})
	}
	sort.Slice(r.Pools, func(i, j int) bool { return r.Pools[i].Pool < r.Pools[j].Pool })
	t := &r.Total
	var atTarget float64
	for _, w := range s.cfg.Policy.Workloads {
		st := *s.stats[w.Name]
		if j := s.jobs[w.Name]; j != nil {
			t.Jobs++
			st.OnDemandUSD = j.planOD
			st.DeadlineHours = round(w.Deadline.Hours(), 3)
			if !j.finished.IsZero() {
				st.Finished = true
				t.Finished++
				st.FinishHours = round(j.finished.Sub(s.cfg.Start).Hours(), 3)
			}
			deadline := s.cfg.Start.Add(w.Deadline)
			st.Missed = w.Deadline > 0 && ((st.Finished && j.finished.After(deadline)) || (!st.Finished && !deadline.After(end)))
			if st.Missed {
				t.DeadlineMisses++
			}
		}
		if sv := s.svcs[w.Name]; sv != nil {
			t.Services++
			st.OnDemandUSD = sv.odNeeded
			if sv.odPrice == 0 {
				st.OnDemandUSD = st.InstanceOnDemandUSD // never planned
			}
			if sv.observed > 0 {
				st.TimeAtTarget = round(float64(sv.atTarget)/float64(sv.observed), 4)
			}
			atTarget += st.TimeAtTarget
		}
		if st.OnDemandUSD > 0 {
			st.Ratio = round(st.CostUSD/st.OnDemandUSD, 4)
		}
		t.CostUSD += st.CostUSD
		t.OnDemandUSD += st.OnDemandUSD
		t.Launches += st.Launches
		t.Preemptions += st.Preemptions
		t.Migrations += st.Migrations
		st.CostUSD, st.OnDemandUSD = round(st.CostUSD, 2), round(st.OnDemandUSD, 2)
		st.InstanceOnDemandUSD, st.InstanceHours = round(st.InstanceOnDemandUSD, 2), round(st.InstanceHours, 2)
		r.Workloads = append(r.Workloads, st)
	}
	if t.OnDemandUSD > 0 {
		t.Ratio = round(t.CostUSD/t.OnDemandUSD, 4)
	}
	t.CostUSD, t.OnDemandUSD = round(t.CostUSD, 2), round(t.OnDemandUSD, 2)
	if t.Services > 0 {
		t.TimeAtTarget = round(atTarget/float64(t.Services), 4)
	}
	t.APICallsByKind = map[string]int{}
	for _, c := range s.computes {
		for k, n := range c.Calls() {
			t.APICallsByKind[string(k)] += n
			t.APICalls += n
		}
	}
	t.Passes = s.passes
	if s.budgets != nil {
		r.Budgets = s.budgets.report(s.cfg.Start, end)
	}
	return r
}

// WriteTable writes the report as aligned text.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "workload\tkind\tcost $\ton-demand $\tratio\tfinish h\tdeadline h\tmissed\tat target\tlaunches\tpreemptions\tmigrations\tAPI calls\t\n")
	for _, x := range r.Workloads {
		finish, deadline, missed, target := "-", "-", "-", "-"
		if x.Kind != "inference" {
			if x.Finished {
				finish = fmt.Sprintf("%.1f", x.FinishHours)
			} else {
				finish = "unfinished"
			}
			if x.DeadlineHours > 0 {
				deadline = fmt.Sprintf("%.1f", x.DeadlineHours)
			}
			missed = fmt.Sprint(x.Missed)
		} else {
			target = fmt.Sprintf("%.1f%%", 100*x.TimeAtTarget)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.3f\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t\n", x.Name, x.Kind, x.CostUSD, x.OnDemandUSD, x.Ratio,
			finish, deadline, missed, target, x.Launches, x.Preemptions, x.Migrations, x.APICalls)
	}
	t := r.Total
	target := "-"
	if t.Services > 0 {
		target = fmt.Sprintf("%.1f%%", 100*t.TimeAtTarget)
	}
	fmt.Fprintf(tw, "total\t\t%.2f\t%.2f\t%.3f\t%d/%d done\t\t%d\t%s\t%d\t%d\t%d\t%d\t\n", t.CostUSD, t.OnDemandUSD, t.Ratio, t.Finished, t.Jobs,
		t.DeadlineMisses, target, t.Launches, t.Preemptions, t.Migrations, t.APICalls)
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, b := range r.Budgets {
		if err := writeBudget(w, b); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "\n%.1f days from %s, seed %d, %d traces over %d used spot pools, %d reconcile passes; API calls by kind: launch %d, terminate %d, list pages %d\n",
		r.Days, r.Start.Format(time.RFC3339), r.Seed, r.Traces, len(r.Pools), t.Passes,
		t.APICallsByKind[string(fake.APILaunch)], t.APICallsByKind[string(fake.APITerminate)], t.APICallsByKind[string(fake.APIListPage)])
	return err
}

var _ fleet.Agents = (*agents)(nil)

// writeBudget writes one budget's line: its spend by month and when it
// was reached.
func writeBudget(w io.Writer, b BudgetReport) error {
	name := b.Name
	switch {
	case name != "":
	case b.Workload != "":
		name = "workload " + b.Workload
	case b.Team != "":
		name = "team " + b.Team
	default:
		name = "all workloads"
	}
	line := fmt.Sprintf("budget %s: $%.0f a month, %s at 100%%;", name, b.MonthlyUSD, b.Action)
	for _, m := range b.Months {
		line += fmt.Sprintf(" %s $%.2f (%.0f%%", m.Month, m.SpentUSD, 100*m.SpentUSD/b.MonthlyUSD)
		for _, l := range m.Levels {
			if l.Percent < 100 {
				line += fmt.Sprintf(", %.0f%% at %.1f h", l.Percent, l.ReachedHours)
			}
		}
		if m.ReachedHours > 0 {
			line += fmt.Sprintf(", reached at %.1f h", m.ReachedHours)
		}
		line += ")"
	}
	_, err := fmt.Fprintln(w, line)
	return err
}
