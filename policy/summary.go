package policy

import (
	"fmt"
	"strconv"
	"strings"
)

// Summary describes a policy in one paragraph: its workloads by kind, the
// clouds, regions and residency it allows, its quotas and budgets.
func Summary(p *Policy) string {
	var b strings.Builder
	counts := map[Kind]int{}
	for _, w := range p.Workloads {
		counts[w.Kind]++
	}
	var kinds []string
	for _, k := range []Kind{Training, Inference, Batch} {
		if n := counts[k]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
		}
	}
	fmt.Fprintf(&b, "%s (%s)", count(len(p.Workloads), "workload"), strings.Join(kinds, ", "))
	if s := recurring(p.Workloads); s != "" {
		b.WriteString(", " + s)
	}
	fmt.Fprintf(&b, " on %s", cloudList(p.Clouds))
	if !(len(p.Regions) == 1 && p.Regions[0] == "*") {
		fmt.Fprintf(&b, " in regions %s", strings.Join(p.Regions, ", "))
	}
	if len(p.Residency) > 0 {
		fmt.Fprintf(&b, ", data kept in %s", strings.Join(p.Residency, ", "))
	}
	fmt.Fprintf(&b, "; %s, %s; planning horizon %s.", count(len(p.Quotas), "quota"), count(len(p.Budgets), "budget"), FormatDuration(p.Horizon))
	return b.String()
}

func count(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// summaryNames is how many scheduled jobs or profiled services Summary names
// before it only counts the rest.
const summaryNames = 4

// recurring describes the scheduled jobs (runs per 30-day month, the budget
// period) and the load-profiled services (replica-hours per day, and the
// peak the plan lays them out for), whether they come from the file or the
// API: "2 scheduled (nightly 30 runs/month, ...), 1 load-profiled (search
// 151.2 replica-hours/day, peak 8)". Empty when there are none.
func recurring(ws []Workload) string {
	var sched, load []string
	for i := range ws {
		w := &ws[i]
		switch {
		case w.Schedule != "" && w.Kind != Inference:
			c, err := ParseCron(w.Schedule)
			if err != nil {
				continue // Summary is for valid policies; validation reports it
			}
			sched = append(sched, fmt.Sprintf("%s %s runs/month", w.Name, figure(c.Stats().PerMonth)))
		case w.Load != nil && w.Kind == Inference:
			reps, _ := w.Load.Replicas(w.Replicas)
			if len(reps) == 0 {
				continue
			}
			sum, peak := 0, 0
			for _, n := range reps {
				sum += n
				peak = max(peak, n)
			}
			perDay := float64(sum) * 24 / float64(len(reps))
			load = append(load, fmt.Sprintf("%s %s replica-hours/day, peak %d", w.Name, figure(perDay), peak))
		}
	}
	var parts []string
	if len(sched) > 0 {
		parts = append(parts, fmt.Sprintf("%d scheduled (%s)", len(sched), names(sched)))
	}
	if len(load) > 0 {
		parts = append(parts, fmt.Sprintf("%d load-profiled (%s)", len(load), names(load)))
	}
	return strings.Join(parts, ", ")
}

func names(items []string) string {
	if len(items) <= summaryNames {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:summaryNames], "; ") + fmt.Sprintf("; %d more", len(items)-summaryNames)
}

// figure prints a count with at most two decimals and no trailing zeros.
func figure(x float64) string {
	return strconv.FormatFloat(float64(int64(x*100+0.5))/100, 'f', -1, 64)
}
