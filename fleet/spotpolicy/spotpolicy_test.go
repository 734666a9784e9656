package spotpolicy

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// state is a job with 10 h of work due in 14 h, 10 min ticks, 12 min
// changeovers, one pool.
func state(done, elapsedTicks float64, cur Action, avail bool) *State {
	return &State{Tick: int(elapsedTicks), Gap: 600, Work: 36000, Deadline: 50400, Changeover: 720, Done: done, Current: cur,
		Pools: []Pool{{Available: avail, Run: 1, Frac: 0.5}}, OnDemandPrice: 3, SpotPrice: 1}
}

func TestSafe(t *testing.T) {
	tests := []struct {
		name string
		s    *State
		a    Action
		want bool
	}{
		{"idle with lots of slack", state(0, 0, Idle, false), Idle, true},
		// Remaining 10 h work, 12 min changeover: idle is safe while at
		// least one tick plus a changeover of slack remains.
		{"idle at the last safe tick", state(0, 21, Idle, false), Idle, true},
		{"idle one tick too late", state(0, 22, Idle, false), Idle, false},
		{"new spot when idle would be unsafe", state(0, 22, Idle, true), RunSpot(0), false},
		// On spot with the changeover paid, keeping it makes a full tick of
		// progress, so it stays safe for as long as switching is.
		{"keep running spot at the edge", &State{Tick: 22, Gap: 600, Work: 36000, Deadline: 50400, Changeover: 720, Done: 0, Current: RunSpot(0),
			Pools: []Pool{{Available: true}}}, RunSpot(0), true},
		{"on-demand always safe", state(0, 60, Idle, false), RunOnDemand, true},
		{"finishing on spot within the tick", &State{Tick: 83, Gap: 600, Work: 36000, Deadline: 50400, Changeover: 720, Done: 35700,
			Current: RunSpot(0), Pools: []Pool{{Available: true}}}, RunSpot(0), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.Safe(tc.a); got != tc.want {
				t.Fatalf("Safe(%v) = %v; want %v (slack %.0f s)", tc.a, got, tc.want, tc.s.Slack())
			}
		})
	}
}

func TestGuard(t *testing.T) {
	s := state(0, 0, Idle, false)
	if got := Guard(s, RunSpot(0)); got != Idle {
		t.Fatalf("spot without capacity: %v; want idle", got)
	}
	if got := Guard(s, RunSpot(3)); got != Idle {
		t.Fatalf("unknown pool: %v; want idle", got)
	}
	late := state(0, 45, Idle, true)
	if got := Guard(late, RunSpot(0)); got != RunOnDemand {
		t.Fatalf("unsafe spot: %v; want on-demand", got)
	}
}

func TestWorstCost(t *testing.T) {
	s := state(0, 0, Idle, true)
	// Idle: the whole job on on-demand, as the baseline.
	if got, want := s.WorstCost(Idle), s.OnDemandOnlyCost(); math.Abs(got-want) > 1e-9 {
		t.Fatalf("idle worst %.4f; want %.4f", got, want)
	}
	// New spot: two ticks (1200 s) to clear the 720 s changeover at $1/h,
	// then 480 s of progress less on on-demand.
	want := 1200.0/3600 + (36000-480+720)*3.0/3600
	if got := s.WorstCost(RunSpot(0)); math.Abs(got-want) > 1e-9 {
		t.Fatalf("spot worst %.4f; want %.4f", got, want)
	}
}

func TestPoliciesByName(t *testing.T) {
	for _, n := range TrainingPolicies() {
		p, err := NewTraining(n)
		if err != nil || p.Name() != n {
			t.Fatalf("NewTraining(%q) = %v, %v", n, p, err)
		}
	}
	if _, err := NewTraining("greedyy"); err == nil || !strings.Contains(err.Error(), "uniform-progress") {
		t.Fatalf("unknown policy error %v should list the known ones", err)
	}
	for _, n := range InferencePolicies() {
		p, err := NewInference(n)
		if err != nil || p.Name() != n {
			t.Fatalf("NewInference(%q) = %v, %v", n, p, err)
		}
	}
	if _, err := NewInference("x"); err == nil {
		t.Fatal("unknown inference policy accepted")
	}
}

func TestUniformProgressRules(t *testing.T) {
	u := &uniformProgress{}
	// Behind the line and no spot: on-demand.
	if got := u.Decide(state(0, 6, Idle, false)); got != RunOnDemand {
		t.Fatalf("behind, no spot: %v", got)
	}
	// On on-demand, ahead of the line now but not 2 changeovers ahead: stay.
	s := state(6*600*36000/50400+10, 6, RunOnDemand, true)
	if got := u.Decide(s); got != RunOnDemand {
		t.Fatalf("hysteresis: %v; want on-demand", got)
	}
	// Well ahead on on-demand with spot: take spot.
	u2 := &uniformProgress{}
	if got := u2.Decide(state(20000, 6, RunOnDemand, true)); got != RunSpot(0) {
		t.Fatalf("ahead with spot: %v; want spot", got)
	}
	// Ahead, idle, no spot: wait.
	if got := u2.Decide(state(20000, 6, Idle, false)); got != Idle {
		t.Fatalf("ahead without spot: %v; want idle", got)
	}
}

func TestSpread(t *testing.T) {
	zones := []Zone{{Capacity: 1}, {Capacity: 3}, {Capacity: 0}, {Capacity: 2}}
	got := spread(zones, 5, func(z Zone) float64 { return float64(z.Capacity) })
	want := []int{1, 2, 0, 2}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("spread = %v; want %v", got, want)
		}
	}
	if got := spread(zones, 10, func(Zone) float64 { return 0 }); sum(got) != 6 {
		t.Fatalf("spread beyond capacity placed %d; want 6", sum(got))
	}
}

func TestRiskHedge(t *testing.T) {
	surv := func(fail float64) [][]float64 {
		var out [][]float64
		for range 6 {
			out = append(out, allOrNothing(1, fail))
		}
		return out
	}
	if got := riskHedge(4, surv(0), 0.01, 0); got != 0 {
		t.Fatalf("six stable zones: hedge %d; want 0", got)
	}
	if got := riskHedge(4, surv(0.9), 0.01, 0); got != 4 {
		t.Fatalf("six flaky zones: hedge %d; want the whole target", got)
	}
}

func TestAdaptiveInferenceHedgesWhenSpotIsShort(t *testing.T) {
	a := NewAdaptiveInference(DefaultAdaptiveInferenceConfig())
	s := &InferenceState{Gap: 195, Target: 4, ReadyDelay: 600}
	for k := range 9 {
		z := Zone{Pool: Pool{Available: k < 2, MeanUp: 500, Run: 50}, Capacity: 0}
		if k < 2 {
			z.Capacity = 1
		}
		s.Zones = append(s.Zones, z)
	}
	f := a.Decide(s)
	if sum(f.Spot) != 2 || f.OnDemand < 3 {
		t.Fatalf("two zones with spot: %v spot, %d on-demand; want 2 spot and on-demand for the rest", f.Spot, f.OnDemand)
	}
}

// A zone's replicas fail together: two zones of three replicas each, each
// zone lost with chance 0.1 over the ready delay. Independently, one zone
// is lost with chance 0.18 (three spot left: one on-demand covers it) and
// both with 0.01; failing together, both go with chance 0.1, so the whole
// target must be hedged.
func TestRiskHedgeZonesFailTogether(t *testing.T) {
	surv := [][]float64{allOrNothing(3, 0.1), allOrNothing(3, 0.1)}
	if got := riskHedge(4, surv, 0.02, 0); got != 1 {
		t.Errorf("independent zones: hedge %d; want 1", got)
	}
	if got := riskHedge(4, surv, 0.02, 1); got != 4 {
		t.Errorf("zones failing together: hedge %d; want 4", got)
	}
}

// A zone that, when it loses capacity, keeps two of three replicas: two
// such zones lose one replica each at worst, so five of six stay up even
// when both go at once and no on-demand is needed for a target of 4;
// losing all three in a loss, as the all-or-nothing model assumes, needs
// the whole target hedged when they go together.
func TestRiskHedgePartialLosses(t *testing.T) {
	partial := []float64{0, 0, 0.1, 0.9}
	surv := [][]float64{partial, partial}
	for _, rho := range []float64{0, 0.5, 1} {
		if got := riskHedge(4, surv, 0.02, rho); got != 0 {
			t.Errorf("partial losses, weight %.1f together: hedge %d; want 0", rho, got)
		}
	}
	// Losing two of three with chance 0.1: together the survivors are
	// 2 (chance 0.1), so two on-demand; independently 2 with chance 0.01
	// (both zones) and 4 with 0.18 (one zone): within a risk of 0.02 no
	// hedge, within 0.005 two on-demand (one leaves 3).
	lossy := [][]float64{{0, 0.1, 0, 0.9}, {0, 0.1, 0, 0.9}}
	if got := riskHedge(4, lossy, 0.02, 1); got != 2 {
		t.Errorf("two of three lost together: hedge %d; want 2", got)
	}
	if got := riskHedge(4, lossy, 0.005, 0); got != 2 {
		t.Errorf("two of three lost independently, risk 0.005: hedge %d; want 2", got)
	}
	if got := riskHedge(4, lossy, 0.02, 0); got != 0 {
		t.Errorf("two of three lost independently, risk 0.02: hedge %d; want 0", got)
	}
}

// The policy measures how many replicas a zone's losses take: a zone of 16
// that drops to 2 now and then for a few ticks keeps 2 of 4 replicas when
// it loses capacity; one that drops to 0 as often keeps none.
func TestAdaptiveInferenceMeasuresPartialLosses(t *testing.T) {
	run := func(low int) []float64 {
		a := NewAdaptiveInference(DefaultAdaptiveInferenceConfig())
		s := &InferenceState{Gap: 300, Target: 4, ReadyDelay: 600, SpotPrice: 1, OnDemandPrice: 3}
		for i := range 2000 {
			c := 16
			if i%100 >= 97 {
				c = low
			}
			s.Tick = i
			s.Zones = []Zone{{Pool: Pool{Available: c > 0, MeanUp: 97}, Capacity: c}}
			a.Decide(s)
		}
		return a.survival(s, 0, 4)
	}
	partial, whole := run(2), run(0)
	// Only the prior (one loss of all) puts weight on 0.
	if partial[0] > partial[2]/20 || partial[1] > 1e-9 || partial[2] < 0.01 {
		t.Errorf("zone dropping to 2: survival of 4 %v; want losses to keep 2", partial)
	}
	if whole[0] < 0.01 || whole[2] > 1e-9 {
		t.Errorf("zone dropping to 0: survival of 4 %v; want losses to take all", whole)
	}
	if d := partial[0] + partial[2] - whole[0] - whole[2]; d > 0.01 || d < -0.01 {
		t.Errorf("same loss rate, different depth: loss chance %.3f vs %.3f", partial[0]+partial[2], whole[0]+whole[2])
	}
}

// together measures the share of losses that follow another zone's loss
// within one ready delay, beyond chance: when two zones always go at once,
// one loss of each pair follows the other, so about one half; near zero
// when they go at different times.
func TestAdaptiveInferenceMeasuresJointLosses(t *testing.T) {
	run := func(offset int) float64 {
		a := NewAdaptiveInference(DefaultAdaptiveInferenceConfig())
		s := &InferenceState{Gap: 60, Target: 4, ReadyDelay: 120, SpotPrice: 1, OnDemandPrice: 3}
		up := func(i, phase int) int {
			if (i+phase)%100 < 50 {
				return 1
			}
			return 0
		}
		for i := range 5000 {
			s.Tick = i
			s.Zones = []Zone{{Pool: Pool{Available: up(i, 0) > 0, MeanUp: 50}, Capacity: up(i, 0)},
				{Pool: Pool{Available: up(i, offset) > 0, MeanUp: 50}, Capacity: up(i, offset)}}
			a.Decide(s)
		}
		return a.together()
	}
	if rho := run(0); rho < 0.45 || rho > 0.55 {
		t.Errorf("zones failing at once: weight %.2f; want about 0.5", rho)
	}
	if rho := run(37); rho > 0.1 {
		t.Errorf("zones failing 37 ticks apart: weight %.2f; want ≤ 0.1", rho)
	}
}

// BenchmarkAdaptiveInferenceDecide is one decision of the default policy
// per op, over zones whose capacity changes now and then (a loss every 50
// ticks in a zone, to a quarter of its capacity), for a small service on
// one-instance zones and a large one on multi-node zones.
func BenchmarkAdaptiveInferenceDecide(b *testing.B) {
	for _, bc := range []struct {
		name          string
		target, zones int
		capacity      int
	}{
		{"target4-9zones-cap1", 4, 9, 1},
		{"target4-3zones-cap16", 4, 3, 16},
		{"target32-6zones-cap64", 32, 6, 64},
	} {
		b.Run(bc.name, func(b *testing.B) {
			a := NewAdaptiveInference(DefaultAdaptiveInferenceConfig())
			s := &InferenceState{Gap: 300, Target: bc.target, ReadyDelay: 600, SpotPrice: 0.97, OnDemandPrice: 3.06,
				Zones: make([]Zone, bc.zones)}
			i := 0
			for b.Loop() {
				s.Tick = i
				for k := range s.Zones {
					c := bc.capacity
					if (i+7*k)%50 < 3 {
						c = bc.capacity / 4
					}
					s.Zones[k] = Zone{Pool: Pool{Available: c > 0, MeanUp: 47, Run: 10, Frac: 0.9}, Capacity: c,
						Spot: min(c, bc.target/bc.zones+1), SpotReady: min(c, bc.target/bc.zones+1)}
				}
				a.Decide(s)
				i++
			}
		})
	}
}

// Spot at or above the on-demand price buys nothing: the whole target goes
// on demand, and spot replicas that run stay until on-demand is ready.
func TestAdaptiveInferenceSpotNotCheaper(t *testing.T) {
	for _, tc := range []struct {
		name            string
		spot, od        float64
		running, odRdy  int
		wantSpot, wantO int
	}{
		{"spot cheaper", 0.97, 3.06, 0, 0, -1, -1},
		{"spot as dear", 3.06, 3.06, 0, 0, 0, 4},
		{"spot dearer", 3.5, 3.06, 0, 0, 0, 4},
		{"spot dearer, spot running, on demand not ready", 3.5, 3.06, 2, 0, 6, 4},
		{"spot dearer, on demand ready", 3.5, 3.06, 2, 4, 0, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAdaptiveInference(DefaultAdaptiveInferenceConfig())
			s := &InferenceState{Gap: 195, Target: 4, ReadyDelay: 600, SpotPrice: tc.spot, OnDemandPrice: tc.od,
				OnDemand: tc.odRdy, OnDemandReady: tc.odRdy}
			for range 3 {
				s.Zones = append(s.Zones, Zone{Pool: Pool{Available: true, MeanUp: 1e6, Run: 1000}, Capacity: 4, Spot: tc.running, SpotReady: tc.running})
			}
			f := a.Decide(s)
			if tc.wantSpot < 0 { // any spot: the policy hedges as usual
				if sum(f.Spot) == 0 {
					t.Errorf("cheap spot: spot %v on-demand %d, want spot", f.Spot, f.OnDemand)
				}
				return
			}
			if sum(f.Spot) != tc.wantSpot || f.OnDemand != tc.wantO {
				t.Errorf("spot %v on-demand %d, want %d spot and %d on demand", f.Spot, f.OnDemand, tc.wantSpot, tc.wantO)
			}
		})
	}
}

// A zone whose capacity falls to a limit learned from a refusal
// (Zone.Limited: it refused one more replica while it held some) lost
// nothing: no loss is counted, its loss windows see no fall, and its
// survival stays that of a zone that never lost; the same fall unlimited
// is a loss, and so is a later loss of what it held.
func TestAdaptiveInferenceLimitedIsNoLoss(t *testing.T) {
	cases := []struct {
		name    string
		limited bool
		lose    bool // the zone then loses all it holds
		losses  float64
	}{
		{"limit learned", true, false, 0},
		{"capacity lost", false, false, 1},
		{"limit learned, then lost", true, true, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := NewAdaptiveInference(DefaultAdaptiveInferenceConfig())
			s := &InferenceState{Gap: 60, Target: 4, ReadyDelay: 600, SpotPrice: 1, OnDemandPrice: 3}
			zone := func(capacity int, limited bool) []Zone {
				return []Zone{{Pool: Pool{Available: capacity > 0, Run: 100, Frac: 0.9, MeanUp: 100}, Capacity: capacity, Limited: limited,
					Spot: min(capacity, 2), SpotReady: min(capacity, 2)}, {Pool: Pool{Available: true, Run: 100, Frac: 0.9, MeanUp: 100}, Capacity: 64}}
			}
			for i := range 60 {
				s.Tick, s.Zones = i, zone(64, false)
				a.Decide(s)
			}
			for i := 60; i < 120; i++ {
				s.Tick, s.Zones = i, zone(2, c.limited)
				a.Decide(s)
			}
			if c.lose {
				s.Tick, s.Zones = 120, zone(0, false)
				a.Decide(s)
			}
			if a.zoneLosses[0] != c.losses || a.losses != c.losses {
				t.Errorf("losses counted %v (zone %v); want %v", a.losses, a.zoneLosses[0], c.losses)
			}
			var windowed float64
			for _, h := range a.windows[0].hist {
				for _, x := range h {
					windowed += x
				}
			}
			if !c.limited && windowed == 0 || c.limited && !c.lose && windowed != 0 {
				t.Errorf("loss windows saw %v falls; limited %v", windowed, c.limited)
			}
		})
	}
}

// A policy keeps riskHedge's working memory between calls: reused over
// inputs of every size (large after small and small after large), it must
// answer as fresh memory does.
func TestRiskScratchReuseAnswersAsFresh(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 1))
	var x riskScratch
	for i := range 2000 {
		var surv [][]float64
		for range rng.IntN(10) {
			n := rng.IntN(6) // replicas in the zone (0: none)
			d := make([]float64, n+1)
			left := 1.0
			for j := range d {
				if j == n || rng.IntN(3) == 0 {
					continue
				}
				d[j] = left * rng.Float64() / 2
				left -= d[j]
			}
			d[n] += left
			surv = append(surv, d)
		}
		target, risk, rho := 1+rng.IntN(8), rng.Float64()/10, rng.Float64()
		if got, want := x.hedge(target, surv, risk, rho), riskHedge(target, surv, risk, rho); got != want {
			t.Fatalf("case %d (target %d, risk %.3f, rho %.3f, %v): reused memory hedges %d, fresh %d", i, target, risk, rho, surv, got, want)
		}
	}
}

// lossWindows finds the least capacity of a window without a division
// per entry: on random capacities its counts must be those of the plain
// ring walk.
func TestLossWindowsCountAsTheRingWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	for _, size := range []int{2, 3, 12} {
		const want = 6
		w := newLossWindows(size, want)
		ref := lossWindows{caps: make([]int, size), hist: make([][]float64, want+1)}
		for n := range w.hist {
			ref.hist[n] = make([]float64, n+1)
		}
		for range 5000 {
			c := rng.IntN(8)
			w.observe(c, want)
			// The walk it replaced.
			ref.caps[ref.seen%len(ref.caps)] = c
			ref.seen++
			if ref.seen < len(ref.caps) {
				continue
			}
			first, least := ref.caps[ref.seen%len(ref.caps)], math.MaxInt
			for i := 1; i < len(ref.caps); i++ {
				least = min(least, ref.caps[(ref.seen+i)%len(ref.caps)])
			}
			if least < min(first, want) {
				for n := 1; n < len(ref.hist) && n <= first; n++ {
					ref.hist[n][min(n, least)]++
				}
			}
		}
		if !slices.EqualFunc(w.hist, ref.hist, slices.Equal[[]float64]) {
			t.Errorf("window of %d: counts %v; the ring walk's %v", size, w.hist, ref.hist)
		}
		for n, h := range ref.hist {
			total := 1.0
			for _, x := range h {
				total += x
			}
			if w.total[n] != total {
				t.Errorf("window of %d: total of %d replicas' counts %v, summed %v", size, n, w.total[n], total)
			}
		}
	}
}

// randomZones appends n random zones to dst: mostly available, small
// capacities, some of them learned limits, replicas within them.
func randomZones(rng *rand.Rand, dst []Zone, n int) []Zone {
	for range n {
		up := rng.IntN(10) < 8
		c := 0
		if up {
			c = rng.IntN(5)
		}
		z := Zone{Pool: Pool{Available: up, Run: 1 + rng.IntN(200), Frac: rng.Float64(), MeanUp: float64(rng.IntN(300))}, Capacity: c,
			Limited: rng.IntN(20) == 0}
		z.Spot = rng.IntN(c + 1)
		z.SpotReady = rng.IntN(z.Spot + 1)
		dst = append(dst, z)
	}
	return dst
}

// The adaptive policy skips sizing the hedge of replica counts whose spot
// alone costs as much as its best plan so far: on random states, tick
// after tick, it must decide exactly as when it sizes every one.
func TestAdaptiveInferencePruningDecidesTheSame(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 5))
	for run := range 40 {
		pruned, full := NewAdaptiveInference(DefaultAdaptiveInferenceConfig()), NewAdaptiveInference(DefaultAdaptiveInferenceConfig())
		full.noPrune = true
		zones := 1 + rng.IntN(9)
		target := 1 + rng.IntN(6)
		od := []float64{0, 3, 1.2, 5}[rng.IntN(4)]
		for tick := range 300 {
			s := &InferenceState{Tick: tick, Gap: 60, Target: target, ReadyDelay: 600, SpotPrice: 1, OnDemandPrice: od}
			s.Zones = randomZones(rng, s.Zones, zones)
			s2 := *s
			s2.Zones = slices.Clone(s.Zones)
			a, b := pruned.Decide(s), full.Decide(&s2)
			if !slices.Equal(a.Spot, b.Spot) || a.OnDemand != b.OnDemand {
				t.Fatalf("run %d tick %d: pruned %+v, sizing every count %+v", run, tick, a, b)
			}
		}
	}
}
