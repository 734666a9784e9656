package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
)

// Prices are USD per instance-hour.
type Prices struct {
	OnDemand float64
	Spot     float64
}

// DefaultPrices are p3.2xlarge's in us-east-1, the paper's setting.
var DefaultPrices = Prices{OnDemand: 3.06, Spot: 0.97}

// Training is the setting of a training simulation.
type Training struct {
	Work       time.Duration // compute needed
	Deadline   time.Duration // after start
	Changeover time.Duration // lost at every instance start
	// Checkpoint is the work between checkpoints: a preemption loses the
	// work since the last one (0: saved continuously, the paper's setting).
	Checkpoint time.Duration
	Prices     Prices
	// History is how much of the trace before a start the policy may see,
	// as a real broker would have watched the pools before the job came.
	History time.Duration
}

// DefaultHistory is the past the policies see by default.
const DefaultHistory = 48 * time.Hour

// ErrSetting marks a simulation setting that cannot be run.
var ErrSetting = errors.New("invalid simulation setting")

// Pools are the spot pools of one simulation: traces on one tick, cut to the
// shortest.
type Pools struct {
	Traces []*Trace
	Gap    int
	Len    int
}

// NewPools checks that traces can be replayed together. Traces measured at
// different ticks (the shared folders use 30 s to 600 s) are resampled to the
// finest of them, so zones from several measurement campaigns can be mixed;
// see Resample for how a coarse tick is split.
func NewPools(traces []*Trace) (*Pools, error) {
	if len(traces) == 0 {
		return nil, fmt.Errorf("%w: no traces", ErrSetting)
	}
	gap, secs := traces[0].Gap, int64(math.MaxInt64)
	for _, t := range traces {
		if t.Gap <= 0 {
			return nil, fmt.Errorf("%w: trace %s has ticks of %d s; want a positive tick", ErrSetting, t.Name, t.Gap)
		}
		gap, secs = min(gap, t.Gap), min(secs, int64(len(t.Avail))*int64(t.Gap))
	}
	p := &Pools{Gap: gap, Len: math.MaxInt}
	for _, t := range traces {
		if t.Gap != gap {
			// Only as far as the shortest trace: a day of 1-s ticks
			// beside months of 10-minute ones stays a day.
			t = t.Resample(gap, int(secs/int64(gap)))
		}
		p.Traces = append(p.Traces, t)
		p.Len = min(p.Len, len(t.Avail))
	}
	if p.Len == 0 {
		return nil, fmt.Errorf("%w: the %d traces overlap for less than one tick of %d s", ErrSetting, len(traces), gap)
	}
	return p, nil
}

// Resample returns the trace on ticks of gap seconds (at most its own), at
// most limit of them. A new tick gets the least capacity of the old ticks it
// overlaps, so a loss is never seen later than it happened, only up to one
// new tick earlier; the trace ends with the last new tick it covers whole.
func (t *Trace) Resample(gap, limit int) *Trace {
	if gap <= 0 || gap >= t.Gap {
		return t
	}
	old, n := int64(t.Gap), min(int64(limit), int64(len(t.Avail))*int64(t.Gap)/int64(gap))
	out := &Trace{Name: t.Name, Gap: gap, Avail: make([]int, n), Measured: t.Gap}
	if t.Measured > 0 {
		out.Measured = t.Measured
	}
	for k := range n {
		from, to := k*int64(gap)/old, ((k+1)*int64(gap)-1)/old
		a := t.Avail[from]
		for j := from + 1; j <= to; j++ {
			a = min(a, t.Avail[j])
		}
		out.Avail[k] = a
	}
	return out
}

// Available reports whether pool k has capacity at tick i.
func (p *Pools) Available(k, i int) bool { return p.Traces[k].Avail[i] > 0 }

func (c Training) validate(p *Pools) (ticks int, err error) {
	switch {
	case c.Work <= 0 || c.Deadline <= 0:
		return 0, fmt.Errorf("%w: work and deadline must be positive", ErrSetting)
	case c.Changeover < 0 || c.Checkpoint < 0:
		return 0, fmt.Errorf("%w: changeover and checkpoint interval must not be negative", ErrSetting)
	case c.Work+c.Changeover > c.Deadline:
		return 0, fmt.Errorf("%w: work %v plus one changeover %v does not fit in the deadline %v even on on-demand", ErrSetting, c.Work, c.Changeover, c.Deadline)
	case c.Prices.OnDemand <= 0 || c.Prices.Spot < 0:
		return 0, fmt.Errorf("%w: prices must be positive", ErrSetting)
	}
	ticks = int(math.Ceil(c.Deadline.Seconds() / float64(p.Gap)))
	if ticks >= p.Len {
		return 0, fmt.Errorf("%w: the deadline %v needs %d ticks of %d s; the traces have %d", ErrSetting, c.Deadline, ticks, p.Gap, p.Len)
	}
	return ticks, nil
}

// OnDemandCost is the cost of the job on on-demand only (one changeover and
// the work): the baseline every cost is normalised by.
func (c Training) OnDemandCost() float64 {
	return (c.Work + c.Changeover).Hours() * c.Prices.OnDemand
}

// Step is one tick of a recorded run.
type Step struct {
	Action   spotpolicy.Action
	Done     float64 // work done at the end of the tick, seconds
	Preempt  bool    // the spot instance of the previous tick lost its capacity
	Capacity []bool  // per pool
}

// Run is one simulated start.
type Run struct {
	Start         int     `json:"start_tick"`
	Cost          float64 `json:"cost_usd"`
	Normalized    float64 `json:"cost_vs_on_demand"`
	SpotHours     float64 `json:"spot_hours"`
	OnDemandHours float64 `json:"on_demand_hours"`
	FinishHours   float64 `json:"finish_hours"`
	Missed        bool    `json:"missed"`
	Preemptions   int     `json:"preemptions"`
	Changeovers   int     `json:"changeovers"`
	LostHours     float64 `json:"lost_work_hours"`
	Steps         []Step  `json:"-"`
}

// job is the model of the simulator: the state of a training job as ticks
// pass. The exact optimum's brute-force check uses the same code.
type job struct {
	gap, work, deadline, changeover float64
	prices                          Prices
	tick                            int
	done, overhead                  float64
	cur                             spotpolicy.Action
	cost, spotSec, odSec            float64
	finish                          float64 // seconds after start; 0 until done
	changeovers                     int
	ckpt, saved, lost               float64 // checkpoint interval, progress saved, work lost to preemptions
}

func (j *job) finished() bool { return j.done >= j.work }

// preempt drops the current spot instance when its pool lost capacity.
func (j *job) preempt() {
	j.lost += j.done - j.saved
	j.done = j.saved
	j.cur, j.overhead = spotpolicy.Idle, 0
}

// step runs action a for one tick. A new instance (any change of capacity
// or pool, and every start after a pause) pays the changeover first.
func (j *job) step(a spotpolicy.Action) {
	if a.Capacity == spotpolicy.None {
		j.cur, j.overhead = a, 0
		j.tick++
		return
	}
	if a != j.cur {
		j.overhead = j.changeover
		j.changeovers++
		j.saved = j.done // the previous instance stopped cleanly, or lost its unsaved work
	}
	j.cur = a
	ov := math.Min(j.overhead, j.gap)
	prog := j.gap - ov
	used := j.gap
	if j.done+prog >= j.work {
		used = ov + (j.work - j.done)
		j.done = j.work
		j.finish = float64(j.tick)*j.gap + used
	} else {
		j.done += prog
	}
	if j.ckpt > 0 {
		j.saved = math.Max(j.saved, math.Floor(j.done/j.ckpt)*j.ckpt)
	} else {
		j.saved = j.done
	}
	j.overhead -= ov
	price := j.prices.OnDemand
	if a.Capacity == spotpolicy.Spot {
		price = j.prices.Spot
		j.spotSec += used
	} else {
		j.odSec += used
	}
	j.cost += price * used / 3600
	j.tick++
}

// RunTraining simulates one start of a policy on the pools. With record it
// keeps the timeline for plotting.
func RunTraining(c Training, p *Pools, pol spotpolicy.Training, start int, record bool) (Run, error) {
	ticks, err := c.validate(p)
	if err != nil {
		return Run{}, err
	}
	if start < 0 || start+ticks >= p.Len {
		return Run{}, fmt.Errorf("%w: start tick %d: want 0 to %d", ErrSetting, start, p.Len-ticks-1)
	}
	gap := float64(p.Gap)
	j := job{gap: gap, work: c.Work.Seconds(), deadline: c.Deadline.Seconds(), changeover: c.Changeover.Seconds(), prices: c.Prices, ckpt: c.Checkpoint.Seconds()}
	k := len(p.Traces)
	tr := make([]spotpolicy.Tracker, k+1) // the last one tracks "any pool"
	for i := range tr {
		tr[i] = spotpolicy.NewTracker(gap)
	}
	observe := func(i int) {
		anyUp := false
		for q := range k {
			a := p.Available(q, i)
			tr[q].Observe(a)
			anyUp = anyUp || a
		}
		tr[k].Observe(anyUp)
	}
	for i := max(0, start-int(c.History.Seconds()/gap)); i < start; i++ {
		observe(i)
	}
	st := &spotpolicy.State{Gap: gap, Work: j.work, Deadline: j.deadline, Changeover: j.changeover, Pools: make([]spotpolicy.Pool, k),
		OnDemandPrice: c.Prices.OnDemand, SpotPrice: c.Prices.Spot, Checkpoint: j.ckpt}
	run := Run{Start: start}
	for !j.finished() && start+j.tick < p.Len {
		i := start + j.tick
		observe(i)
		preempted := false
		if j.cur.Capacity == spotpolicy.Spot && !p.Available(j.cur.Pool, i) {
			j.preempt()
			run.Preemptions++
			preempted = true
		}
		st.Tick, st.Done, st.Current, st.Overhead, st.Spent, st.Saved = j.tick, j.done, j.cur, j.overhead, j.cost, j.saved
		for q := range k {
			st.Pools[q] = tr[q].View()
		}
		st.Any = tr[k].View()
		a := pol.Decide(st)
		if a.Capacity == spotpolicy.Spot && (a.Pool < 0 || a.Pool >= k || !p.Available(a.Pool, i)) {
			a = spotpolicy.Idle // a policy asking for capacity that is not there gets none
		}
		j.step(a)
		if record {
			capv := make([]bool, k)
			for q := range k {
				capv[q] = p.Available(q, i)
			}
			run.Steps = append(run.Steps, Step{Action: a, Done: j.done, Preempt: preempted, Capacity: capv})
		}
	}
	run.Cost = j.cost
	run.Normalized = j.cost / c.OnDemandCost()
	run.SpotHours, run.OnDemandHours = j.spotSec/3600, j.odSec/3600
	run.FinishHours = j.finish / 3600
	run.Missed = !j.finished() || j.finish > j.deadline+1e-6
	run.Changeovers = j.changeovers
	run.LostHours = j.lost / 3600
	return run, nil
}

// Starts draws n start ticks uniformly from those where a whole deadline
// fits in the traces, from a seeded generator so runs repeat.
func Starts(c Training, p *Pools, n int, seed uint64) ([]int, error) {
	ticks, err := c.validate(p)
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("%w: starts must be positive", ErrSetting)
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	out := make([]int, n)
	for i := range out {
		out[i] = rng.IntN(p.Len - ticks)
	}
	return out, nil
}

// Summary aggregates the runs of one policy.
type Summary struct {
	Policy            string  `json:"policy"`
	Runs              int     `json:"runs"`
	MeanCost          float64 `json:"mean_cost_vs_on_demand"`
	P90Cost           float64 `json:"p90_cost_vs_on_demand"`
	MaxCost           float64 `json:"max_cost_vs_on_demand"`
	MeanCostUSD       float64 `json:"mean_cost_usd"`
	Misses            int     `json:"deadline_misses"`
	MeanSpotHours     float64 `json:"mean_spot_hours"`
	MeanOnDemandHours float64 `json:"mean_on_demand_hours"`
	MeanPreemptions   float64 `json:"mean_preemptions"`
	MeanChangeovers   float64 `json:"mean_changeovers"`
	MeanLostHours     float64 `json:"mean_lost_work_hours"`
	// VsOptimum is MeanCost over the exact optimum's mean (0 when the
	// optimum was not computed).
	VsOptimum float64 `json:"vs_optimum,omitempty"`
}

// Summarize aggregates runs.
func Summarize(policy string, runs []Run) Summary {
	s := Summary{Policy: policy, Runs: len(runs)}
	if len(runs) == 0 {
		return s
	}
	costs := make([]float64, len(runs))
	for i, r := range runs {
		costs[i] = r.Normalized
		s.MeanCost += r.Normalized
		s.MeanCostUSD += r.Cost
		s.MeanSpotHours += r.SpotHours
		s.MeanOnDemandHours += r.OnDemandHours
		s.MeanPreemptions += float64(r.Preemptions)
		s.MeanChangeovers += float64(r.Changeovers)
		s.MeanLostHours += r.LostHours
		if r.Missed {
			s.Misses++
		}
	}
	n := float64(len(runs))
	s.MeanCost /= n
	s.MeanCostUSD /= n
	s.MeanSpotHours /= n
	s.MeanOnDemandHours /= n
	s.MeanPreemptions /= n
	s.MeanChangeovers /= n
	s.MeanLostHours /= n
	sort.Float64s(costs)
	s.P90Cost = quantile(costs, 0.9)
	s.MaxCost = costs[len(costs)-1]
	return s
}

// quantile of sorted xs by linear interpolation.
func quantile(xs []float64, q float64) float64 {
	pos := q * float64(len(xs)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(xs)-1)
	return xs[lo] + (pos-float64(lo))*(xs[hi]-xs[lo])
}

// SimulateTraining runs a policy (fresh per start) over all starts.
func SimulateTraining(c Training, p *Pools, policy string, starts []int) ([]Run, error) {
	runs := make([]Run, 0, len(starts))
	for _, s := range starts {
		pol, err := spotpolicy.NewTraining(policy)
		if err != nil {
			return nil, err
		}
		r, err := RunTraining(c, p, pol, s, false)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}
