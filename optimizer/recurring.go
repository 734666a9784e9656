package optimizer

import (
	"fmt"
	"time"

	"github.com/gpubroker/gpubroker/policy"
)

// What teams run is rarely one job once and a service at min replicas
// around the clock. A job with a cron schedule runs runs-per-period times:
// its expected cost over the horizon is the cost of a run × the runs in the
// horizon, and budgets (per 30-day month) are checked against the cost of
// a run × the runs per month; a run must end before the next starts, which
// is a deadline. A service with a load profile runs the profile's replicas
// hour by hour: it is laid out for its peak (quotas and spot pools are
// concurrent GPUs) and costed at its mean, every zone scaling by the same
// share.

// jobRuns scales a job's per-run figures: runs over the horizon (the
// plan's expected cost) and per 30-day month (budgets). A one-off job
// runs once in both.
type jobRuns struct {
	horizon, month float64
	// gap is the shortest time between runs, hours (0: one-off).
	gap  float64
	cron *policy.Cron
}

var oneRun = jobRuns{horizon: 1, month: 1}

// runsOf is a job's schedule, parsed once per expression.
func (s *solver) runsOf(w *policy.Workload) jobRuns {
	if w.Schedule == "" || w.Kind == policy.Inference {
		return oneRun
	}
	if r, ok := s.schedules[w.Schedule]; ok {
		return r
	}
	r := oneRun
	if c, err := policy.ParseCron(w.Schedule); err == nil {
		st := c.Stats()
		r = jobRuns{horizon: st.PerMonth * s.horizon / monthHours, month: st.PerMonth, gap: st.MinGap.Hours(), cron: c}
	}
	s.schedules[w.Schedule] = r
	return r
}

// jobDeadline is the deadline a run must meet, hours (0: none): the
// workload's own, or the time to the next scheduled run when sooner.
func (s *solver) jobDeadline(w *policy.Workload) (float64, bool) {
	d := w.Deadline.Hours()
	if r := s.runsOf(w); r.gap > 0 && (d == 0 || r.gap < d) {
		return r.gap, true
	}
	return d, false
}

// loadProfile summarises a service's replicas by hour.
type loadProfile struct {
	min, peak int
	mean      float64
	hours     int
	capped    bool // some hour wanted more than max replicas
	byRate    bool
}

// profileOf is w's load profile; ok is false when it has none.
func (s *solver) profileOf(w *policy.Workload) (loadProfile, bool) {
	if w.Load == nil || w.Kind != policy.Inference {
		return loadProfile{}, false
	}
	if p, ok := s.profiles[w]; ok {
		return p, p.hours > 0
	}
	reps, capped := w.Load.Replicas(w.Replicas)
	p := loadProfile{capped: capped, hours: len(reps), byRate: len(w.Load.ReplicasByHour) == 0}
	sum := 0
	for i, n := range reps {
		sum += n
		if i == 0 || n < p.min {
			p.min = n
		}
		p.peak = max(p.peak, n)
	}
	if len(reps) > 0 {
		p.mean = float64(sum) / float64(len(reps))
	}
	s.profiles[w] = p
	return p, p.hours > 0
}

// serviceNeed is the replicas a service's layout is sized for (its
// profile's peak, else min replicas) and the share of that layout's cost
// it runs on average (mean ÷ peak, else 1).
func (s *solver) serviceNeed(w *policy.Workload) (int, float64) {
	minR := max(1, w.Replicas.Min)
	if p, ok := s.profileOf(w); ok && p.peak > 0 {
		return max(minR, p.peak), p.mean / float64(max(minR, p.peak))
	}
	return minR, 1
}

// scheduleLine explains a scheduled job's costing.
func (s *solver) scheduleLine(w *policy.Workload, perRun float64) string {
	r := s.runsOf(w)
	if r.cron == nil {
		return ""
	}
	return fmt.Sprintf("schedule %s (%s): %s runs/month × %s a run = %s/month against budgets; %s runs over the %.0fh horizon = %s; each run must end within %s, before the next starts",
		fmt.Sprintf("%q", w.Schedule), r.cron.Describe(), trimFloat(r.month), usd(perRun), usd(perRun*r.month),
		trimFloat(r.horizon), s.horizon, usd(perRun*r.horizon), policy.FormatDuration(hoursDuration(r.gap)))
}

// profileLine explains a service's load-profile costing.
func (s *solver) profileLine(w *policy.Workload) string {
	p, ok := s.profileOf(w)
	if !ok {
		return ""
	}
	need, scale := s.serviceNeed(w)
	what := "replicas by hour"
	if p.byRate {
		what = fmt.Sprintf("requests per second by hour ÷ (%s per replica × %.0f%% target utilization)", trimFloat(w.Load.RequestsPerReplica), 100*targetUtil(w))
	}
	period := "day"
	if p.hours == 168 {
		period = "week"
	}
	line := fmt.Sprintf("load profile (%s, per hour of the %s): %d–%d replicas, mean %.1f; laid out for the peak %d, costed at mean ÷ peak = %.3f of it",
		what, period, p.min, p.peak, p.mean, need, scale)
	if p.capped {
		line += fmt.Sprintf("; some hours want more than max %d replicas and are capped", max(w.Replicas.Max, w.Replicas.Min))
	}
	return line
}

func targetUtil(w *policy.Workload) float64 {
	if u := w.Replicas.TargetUtilization; u > 0 && u <= 1 {
		return u
	}
	return policy.DefaultTargetUtilization
}

func trimFloat(x float64) string {
	if x == float64(int64(x)) {
		return fmt.Sprintf("%d", int64(x))
	}
	return fmt.Sprintf("%.2f", x)
}

func hoursDuration(h float64) time.Duration { return time.Duration(h * float64(time.Hour)) }
