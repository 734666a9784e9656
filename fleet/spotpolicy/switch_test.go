package spotpolicy

import "testing"

// atRest runs the policy over zone capacities caps[tick][zone] for a
// service that holds its target on demand and runs no spot (every
// decision's spot is taken back before the next tick), and returns the
// last decision; at the last tick, launched spot replicas run in each
// zone, not yet ready.
func atRest(a *AdaptiveInference, target int, caps [][]int, launched int) Fleet {
	tr := make([]Tracker, len(caps[0]))
	for k := range tr {
		tr[k] = NewTracker(300)
	}
	var f Fleet
	for tick, row := range caps {
		s := &InferenceState{Tick: tick, Gap: 300, Target: target, ReadyDelay: 600, SpotPrice: 0.97, OnDemandPrice: 3.06,
			OnDemand: target, OnDemandReady: target}
		for k, c := range row {
			tr[k].Observe(c > 0)
			z := Zone{Pool: tr[k].View(), Capacity: c}
			if tick == len(caps)-1 {
				z.Spot = min(launched, c)
			}
			s.Zones = append(s.Zones, z)
		}
		f = a.Decide(s)
	}
	return f
}

// history is two 16-replica zones up for long, out of step; then, when
// flaps > 0, a spell of that many short returns of each (up 3 ticks, down
// 10, the zones 6 ticks apart so that no loss follows the other's within
// a ready delay); then both back, one tick apart.
func history(flaps int) [][]int {
	var caps [][]int
	add := func(a, b int, n int) {
		for range n {
			caps = append(caps, []int{a, b})
		}
	}
	add(16, 16, 1000)
	add(0, 16, 10)
	add(16, 16, 40)
	add(16, 0, 10)
	add(16, 16, 40)
	for range flaps {
		add(16, 0, 3)
		add(0, 0, 3)
		add(0, 16, 3)
		add(0, 0, 4)
	}
	add(0, 0, 10)
	add(16, 0, 1)
	add(16, 16, 1)
	return caps
}

// Moving a service that holds its target on demand to spot costs a ready
// delay of the spot it launches (and another when it comes back) and of
// the on-demand replica that bridges it: the policy moves only when the
// zones are expected to hold long enough to earn that back. Zones whose
// runs were long are trusted as soon as they return; zones that mostly
// came back for a few ticks at a time are not, though their loss rate
// over all they were seen (one long run among many short ones) leaves
// the risk model content with spot (the policy without the weighing
// launched spot in both). A move under way goes on: its spot is paid
// for.
func TestAdaptiveInferenceWeighsTheSwitch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flaps    int
		launched int
		spot     bool
	}{
		{"zones that hold", 0, 0, true},
		{"zones mostly back for a few ticks", 40, 0, false},
		{"zones mostly back for a few ticks, spot launched", 40, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := atRest(NewAdaptiveInference(DefaultAdaptiveInferenceConfig()), 4, history(tc.flaps), tc.launched)
			if got := sum(f.Spot) > 0; got != tc.spot {
				t.Errorf("spot %v, on-demand %d; want spot launched %v", f.Spot, f.OnDemand, tc.spot)
			}
		})
	}
}

// A plan whose on-demand hedge alone holds the target once its spot is
// ready (one zone of one replica, target 4: 4+Spare-1 on demand) keeps no
// spot: it would only add cost. Running spot stays only until on-demand
// is ready (make before break).
func TestAdaptiveInferenceNoSpotBesideTheTargetOnDemand(t *testing.T) {
	for _, tc := range []struct {
		name             string
		spot, od, odRdy  int
		wantSpot, wantOD int
	}{
		{"on demand", 0, 4, 4, 0, 4},
		{"spot running, on demand ready", 1, 4, 4, 0, 4},
		{"spot running, on demand not ready", 1, 4, 3, 1, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAdaptiveInference(DefaultAdaptiveInferenceConfig())
			s := &InferenceState{Gap: 300, Target: 4, ReadyDelay: 600, SpotPrice: 0.97, OnDemandPrice: 3.06,
				OnDemand: tc.od, OnDemandReady: tc.odRdy,
				Zones: []Zone{{Pool: Pool{Available: true, MeanUp: 1e6, Run: 1000, Frac: 1}, Capacity: 1, Spot: tc.spot, SpotReady: tc.spot}}}
			f := a.Decide(s)
			if sum(f.Spot) != tc.wantSpot || f.OnDemand != tc.wantOD {
				t.Errorf("spot %v, on-demand %d; want %d spot, %d on demand", f.Spot, f.OnDemand, tc.wantSpot, tc.wantOD)
			}
		})
	}
}
