package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
)

// handTrace builds a trace from a function of the tick.
func handTrace(name string, gap, n int, up func(i int) bool) *Trace {
	t := &Trace{Name: name, Gap: gap, Avail: make([]int, n)}
	for i := range t.Avail {
		if up(i) {
			t.Avail[i] = 1
		}
	}
	return t
}

func mustPools(t testing.TB, traces ...*Trace) *Pools {
	t.Helper()
	p, err := NewPools(traces)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A 10 h job due in 14 h, 12 min changeovers, 10 min ticks.
var handSetting = Training{Work: 10 * time.Hour, Deadline: 14 * time.Hour, Changeover: 12 * time.Minute, Prices: DefaultPrices}

func TestPoliciesOnHandMadeTraces(t *testing.T) {
	const gap, n = 600, 200
	deadlineTick := int(handSetting.Deadline.Seconds()) / gap
	spotRatio := DefaultPrices.Spot / DefaultPrices.OnDemand
	traces := []struct {
		name string
		up   func(int) bool
		// want maps a policy to its exact normalised cost; absent = only
		// the general checks.
		want map[string]float64
	}{
		{name: "always available", up: func(int) bool { return true },
			want: map[string]float64{"on-demand": 1, "greedy": spotRatio, "uniform-progress": spotRatio, "adaptive": spotRatio}},
		{name: "never available", up: func(int) bool { return false },
			// uniform-progress leaves on-demand once ahead of its line and
			// pays a changeover to come back: it costs more than on-demand.
			want: map[string]float64{"on-demand": 1, "greedy": 1, "adaptive": 1}},
		{name: "flapping every tick", up: func(i int) bool { return i%2 == 0 }},
		{name: "flapping every 3 hours", up: func(i int) bool { return (i/18)%2 == 0 }},
		{name: "outage right before the deadline", up: func(i int) bool { return i < deadlineTick-20 }},
		{name: "back only at the end", up: func(i int) bool { return i >= deadlineTick-10 }},
	}
	for _, tc := range traces {
		p := mustPools(t, handTrace("hand", gap, n, tc.up))
		for _, name := range spotpolicy.TrainingPolicies() {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				pol, err := spotpolicy.NewTraining(name)
				if err != nil {
					t.Fatal(err)
				}
				run, err := RunTraining(handSetting, p, pol, 0, true)
				if err != nil {
					t.Fatal(err)
				}
				if run.Missed || run.FinishHours > handSetting.Deadline.Hours()+1e-9 {
					t.Fatalf("missed the deadline: finished at %.2f h", run.FinishHours)
				}
				if got := run.SpotHours + run.OnDemandHours; got < handSetting.Work.Hours()-1e-9 {
					t.Fatalf("billed %.2f h for %.0f h of work", got, handSetting.Work.Hours())
				}
				if want, ok := tc.want[name]; ok && math.Abs(run.Normalized-want) > 1e-9 {
					t.Fatalf("cost %.6f; want %.6f", run.Normalized, want)
				}
				for i, st := range run.Steps {
					if st.Action.Capacity == spotpolicy.Spot && !st.Capacity[st.Action.Pool] {
						t.Fatalf("tick %d: ran spot in a pool without capacity", i)
					}
				}
				opt, err := Optimum(handSetting, p, 0)
				if err != nil {
					t.Fatal(err)
				}
				if run.Cost < opt-1e-9 {
					t.Fatalf("policy cost %.4f below the exact optimum %.4f", run.Cost, opt)
				}
			})
		}
	}
}

func TestAdaptiveUsesOtherPools(t *testing.T) {
	// Pool 0 dies after 2 h for good, pool 1 is always up: the adaptive
	// policy moves and stays on spot; greedy and uniform-progress (which
	// take the first pool with capacity) move too, so all cost the same.
	p := mustPools(t, handTrace("a", 600, 200, func(i int) bool { return i < 12 }), handTrace("b", 600, 200, func(int) bool { return true }))
	run, err := RunTraining(handSetting, p, spotpolicy.NewAdaptive(spotpolicy.DefaultAdaptiveConfig()), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if run.OnDemandHours != 0 || run.Changeovers != 2 || run.Preemptions != 1 {
		t.Fatalf("on-demand %.2f h, %d changeovers, %d preemptions; want 0, 2, 1", run.OnDemandHours, run.Changeovers, run.Preemptions)
	}
}

// randomTrace is an on/off Markov chain with mean stretches up and down.
func randomTrace(rng *rand.Rand, name string, gap, n int, meanUp, meanDown float64) *Trace {
	t := &Trace{Name: name, Gap: gap, Avail: make([]int, n)}
	up := rng.IntN(2) == 0
	for i := range t.Avail {
		if up {
			t.Avail[i] = 1 + rng.IntN(2)
			if rng.Float64() < 1/meanUp {
				up = false
			}
		} else if rng.Float64() < 1/meanDown {
			up = true
		}
	}
	return t
}

func TestNoPolicyMissesAFeasibleDeadline(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	iters := 300
	if testing.Short() {
		iters = 60
	}
	for it := range iters {
		gap := 60 * (1 + rng.IntN(15))
		c := Training{
			Work:       time.Duration(1+rng.IntN(40)) * time.Duration(gap) * time.Second / 2,
			Changeover: time.Duration(rng.IntN(3*gap)) * time.Second,
			Prices:     Prices{OnDemand: 1 + rng.Float64()*4, Spot: rng.Float64()},
		}
		if rng.IntN(2) == 0 { // checkpoints every 1 to 4 ticks of work
			c.Checkpoint = time.Duration(1+rng.IntN(4)) * time.Duration(gap) * time.Second
		}
		// From no slack at all to twice the work.
		c.Deadline = c.Work + c.Changeover + time.Duration(rng.Float64()*2*float64(c.Work))
		npools := 1 + rng.IntN(3)
		var trs []*Trace
		for k := range npools {
			trs = append(trs, randomTrace(rng, fmt.Sprint("p", k), gap, 400, 1+rng.Float64()*20, 1+rng.Float64()*20))
		}
		p := mustPools(t, trs...)
		ticks := int(math.Ceil(c.Deadline.Seconds() / float64(gap)))
		if ticks >= p.Len {
			continue
		}
		start := rng.IntN(p.Len - ticks)
		for _, name := range spotpolicy.TrainingPolicies() {
			pol, _ := spotpolicy.NewTraining(name)
			run, err := RunTraining(c, p, pol, start, false)
			if err != nil {
				t.Fatal(err)
			}
			if run.Missed {
				t.Fatalf("iteration %d: %s missed: work %v deadline %v changeover %v checkpoint %v gap %d s, %d pools, start %d; finished at %.3f h",
					it, name, c.Work, c.Deadline, c.Changeover, c.Checkpoint, gap, npools, start, run.FinishHours)
			}
		}
	}
}

// bruteForce tries every sequence of actions with the simulator's own job
// model and returns the cheapest cost that finishes by the deadline.
func bruteForce(c Training, p *Pools, start int) float64 {
	best := math.Inf(1)
	deadline := c.Deadline.Seconds()
	var rec func(j job)
	rec = func(j job) {
		if j.finished() {
			if j.finish <= deadline+1e-9 && j.cost < best {
				best = j.cost
			}
			return
		}
		if float64(j.tick)*j.gap >= deadline || j.cost >= best {
			return
		}
		i := start + j.tick
		if j.cur.Capacity == spotpolicy.Spot && !p.Available(j.cur.Pool, i) {
			j.preempt()
		}
		acts := []spotpolicy.Action{spotpolicy.Idle, spotpolicy.RunOnDemand}
		for k := range p.Traces {
			if p.Available(k, i) {
				acts = append(acts, spotpolicy.RunSpot(k))
			}
		}
		for _, a := range acts {
			next := j
			next.step(a)
			rec(next)
		}
	}
	rec(job{gap: float64(p.Gap), work: c.Work.Seconds(), deadline: deadline, changeover: c.Changeover.Seconds(), prices: c.Prices})
	return best
}

func TestOptimumMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	settings := []Training{
		{Work: 400 * time.Second, Deadline: 700 * time.Second, Changeover: 150 * time.Second, Prices: DefaultPrices},
		{Work: 350 * time.Second, Deadline: 800 * time.Second, Changeover: 100 * time.Second, Prices: DefaultPrices},
		{Work: 500 * time.Second, Deadline: 700 * time.Second, Changeover: 0, Prices: Prices{OnDemand: 2, Spot: 1.5}},
		{Work: 250 * time.Second, Deadline: 760 * time.Second, Changeover: 230 * time.Second, Prices: DefaultPrices},
	}
	for si, c := range settings {
		for trial := range 12 {
			npools := 1 + trial%2
			var trs []*Trace
			for k := range npools {
				trs = append(trs, randomTrace(rng, fmt.Sprint("p", k), 100, 12, 1+rng.Float64()*4, 1+rng.Float64()*3))
			}
			p := mustPools(t, trs...)
			want := bruteForce(c, p, 1)
			got, err := Optimum(c, p, 1)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-want) > 1e-9 {
				t.Fatalf("setting %d trial %d (%d pools, traces %v %v): optimum %.6f, brute force %.6f", si, trial, npools, trs[0].Avail, trs[len(trs)-1].Avail, got, want)
			}
		}
	}
}

func TestOptimumErrors(t *testing.T) {
	p := mustPools(t, handTrace("a", 600, 200, func(int) bool { return true }))
	c := handSetting
	c.Changeover = 1500 * time.Millisecond
	if _, err := Optimum(c, p, 0); err == nil {
		t.Fatal("fractional-second changeover accepted")
	}
	if _, err := Optimum(handSetting, p, 190); err == nil {
		t.Fatal("start past the end accepted")
	}
	tight := handSetting
	tight.Deadline = tight.Work
	if _, err := Optimum(tight, p, 0); err == nil {
		t.Fatal("infeasible deadline accepted")
	}
}

func TestNewPoolsResamplesMixedTicks(t *testing.T) {
	// b's ticks of 90 s end at 90, 180, 270: the 60-s tick [60,120)
	// overlaps b's first two and takes the least of them.
	p, err := NewPools([]*Trace{
		{Name: "a", Gap: 60, Avail: []int{1, 1, 1, 1, 1, 1, 1}},
		{Name: "b", Gap: 90, Avail: []int{3, 0, 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Gap != 60 || p.Len != 4 {
		t.Fatalf("gap %d len %d; want 60 and 4 (270 s of b)", p.Gap, p.Len)
	}
	if got, want := p.Traces[1].Avail, []int{3, 0, 0, 2}; !slices.Equal(got, want) {
		t.Fatalf("b resampled to %v; want %v", got, want)
	}
	if p.Traces[0].Gap != 60 || p.Traces[1].Gap != 60 {
		t.Fatal("resampled trace keeps its old tick")
	}
	// Resampled only as far as the shortest trace goes.
	p, err = NewPools([]*Trace{{Name: "a", Gap: 60, Avail: []int{1, 1}}, {Name: "b", Gap: 90, Avail: []int{3, 0, 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Len != 2 || len(p.Traces[1].Avail) != 2 {
		t.Fatalf("len %d, b resampled to %d ticks; want 2 and 2", p.Len, len(p.Traces[1].Avail))
	}
	for _, bad := range [][]*Trace{
		nil,
		{{Name: "a", Gap: 0, Avail: []int{1}}},
		{{Name: "a", Gap: 60, Avail: []int{1}}, {Name: "b", Gap: 120}},
	} {
		if _, err := NewPools(bad); !errors.Is(err, ErrSetting) {
			t.Errorf("%v: err %v; want ErrSetting", bad, err)
		}
	}
}

func TestCheckpointLoss(t *testing.T) {
	// Spot for 18 ticks of 10 min, then gone: with checkpoints every hour
	// of work, greedy loses the work since the last one and redoes it.
	p := mustPools(t, handTrace("a", 600, 200, func(i int) bool { return i < 18 }))
	c := handSetting
	c.Checkpoint = time.Hour
	pol, _ := spotpolicy.NewTraining(spotpolicy.PolicyGreedy)
	run, err := RunTraining(c, p, pol, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	// 18 ticks = 3 h of spot, 12 min changeover: 2 h 48 min done, 2 h saved.
	if math.Abs(run.LostHours-0.8) > 1e-9 || run.Missed {
		t.Fatalf("lost %.3f h (missed %v); want 0.8 h", run.LostHours, run.Missed)
	}
	c.Checkpoint = 0
	run, _ = RunTraining(c, p, pol, 0, false)
	if run.LostHours != 0 {
		t.Fatalf("continuous checkpoints lost %.3f h", run.LostHours)
	}
}
