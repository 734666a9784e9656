package sim

import (
	"math"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/fleet/spotpolicy"
)

func TestInferenceOnHandMadeZones(t *testing.T) {
	const gap, n = 300, 288 // one day of 5-minute ticks
	c := Inference{Target: 2, ReadyDelay: 10 * time.Minute, Prices: DefaultPrices}
	firstDelay := 2.0 / n // the first two ticks wait for the first replicas
	spot := DefaultPrices.Spot / DefaultPrices.OnDemand
	zones := func(up ...func(int) bool) *Pools {
		var trs []*Trace
		for k, f := range up {
			trs = append(trs, handTrace(string(rune('a'+k)), gap, n, f))
		}
		return mustPools(t, trs...)
	}
	always := func(int) bool { return true }
	never := func(int) bool { return false }
	tests := []struct {
		name     string
		pools    *Pools
		policy   string
		atTarget float64 // exact, or -1 to skip
		cost     float64 // exact, or -1 to skip
	}{
		{"on-demand", zones(never), "on-demand", 1 - firstDelay, 1},
		{"spot-hedge, 4 zones always up", zones(always, always, always, always), "spot-hedge", 1 - firstDelay, 4 * spot / 2},
		{"spot-hedge, no spot", zones(never, never), "spot-hedge", 1 - firstDelay, 1},
		{"adaptive, no spot", zones(never, never, never), "adaptive", 1 - firstDelay, -1},
		{"adaptive, 4 zones always up", zones(always, always, always, always), "adaptive", 1 - firstDelay, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pol, err := spotpolicy.NewInference(tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			r, err := RunInference(c, tc.pools, pol, true)
			if err != nil {
				t.Fatal(err)
			}
			if tc.atTarget >= 0 && math.Abs(r.AtTarget-tc.atTarget) > 1e-9 {
				t.Errorf("at target %.6f; want %.6f", r.AtTarget, tc.atTarget)
			}
			if tc.cost >= 0 && math.Abs(r.Normalized-tc.cost) > 1e-9 {
				t.Errorf("cost %.6f; want %.6f", r.Normalized, tc.cost)
			}
			for i, st := range r.Steps {
				if st.Spot > st.Open {
					t.Fatalf("tick %d: %d spot replicas in %d zones with one slot each", i, st.Spot, st.Open)
				}
			}
		})
	}
}

func TestInferenceZoneLossAndReadyDelay(t *testing.T) {
	// Two zones; zone a goes away for good at tick 50. With target 2 and no
	// spare, spot-hedge runs one spot in each and falls back to on-demand
	// for the lost one, which serves only after the 10-minute delay: two
	// 5-minute ticks below target.
	p := mustPools(t, handTrace("a", 300, 100, func(i int) bool { return i < 50 }), handTrace("b", 300, 100, func(int) bool { return true }))
	c := Inference{Target: 2, ReadyDelay: 10 * time.Minute, Prices: DefaultPrices}
	r, err := RunInference(c, p, &spotpolicy.SpotHedge{Extra: 0}, true)
	if err != nil {
		t.Fatal(err)
	}
	if r.Preemptions != 1 {
		t.Fatalf("%d preemptions; want 1", r.Preemptions)
	}
	if want := 1 - 4.0/100; math.Abs(r.AtTarget-want) > 1e-9 {
		t.Fatalf("at target %.4f; want %.4f (first delay and the replacement's)", r.AtTarget, want)
	}
	if st := r.Steps[60]; st.OnDemand != 1 || st.Spot != 1 || st.Ready != 2 {
		t.Fatalf("tick 60: %+v; want 1 spot, 1 on-demand, 2 ready", st)
	}
}

func TestInferenceReadyDelayNotMultipleOfTick(t *testing.T) {
	// 195 s ticks and a 600 s delay: the first replica serves 600 s after
	// start, 3 ticks and 15 s in, so the fraction at target is exact.
	p := mustPools(t, handTrace("a", 195, 20, func(int) bool { return true }))
	c := Inference{Target: 1, ReadyDelay: 10 * time.Minute, Prices: DefaultPrices}
	r, err := RunInference(c, p, &spotpolicy.SpotHedge{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 - 600.0/(20*195); math.Abs(r.AtTarget-want) > 1e-9 {
		t.Fatalf("at target %.6f; want %.6f", r.AtTarget, want)
	}
}

func TestAdaptiveInferenceCalmHoldsOnDemand(t *testing.T) {
	// Zones up 6 ticks, down 2: with Calm the on-demand hedge is
	// held instead of released on every return of spot.
	flap := func(i int) bool { return i%8 < 6 }
	p := mustPools(t, handTrace("a", 300, 200, flap), handTrace("b", 300, 200, flap))
	c := Inference{Target: 1, ReadyDelay: 10 * time.Minute, Prices: DefaultPrices}
	launches := func(calm int) int {
		r, err := RunInference(c, p, spotpolicy.NewAdaptiveInference(spotpolicy.AdaptiveInferenceConfig{Extra: 1, Spare: 1, Calm: calm}), false)
		if err != nil {
			t.Fatal(err)
		}
		return r.Launches
	}
	if with, without := launches(20), launches(0); with >= without {
		t.Fatalf("launches with calm %d, without %d; calm should launch fewer", with, without)
	}
}

func TestInferenceErrors(t *testing.T) {
	p := mustPools(t, handTrace("a", 300, 10, func(int) bool { return true }))
	pol := &spotpolicy.SpotHedge{}
	for _, c := range []Inference{
		{Target: 0, Prices: DefaultPrices},
		{Target: 1, Prices: Prices{}},
		{Target: 1, Prices: DefaultPrices, Start: 10},
	} {
		if _, err := RunInference(c, p, pol, false); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
