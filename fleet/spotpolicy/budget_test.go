package spotpolicy

import (
	"math"
	"testing"
)

func TestErrorBudget(t *testing.T) {
	type rec struct {
		tick  int
		short float64
	}
	tests := []struct {
		name   string
		goal   float64
		window int
		recs   []rec
		at     int
		want   float64
	}{
		{"untouched", 0.99, 1000, nil, 0, 10},
		{"spent", 0.99, 1000, []rec{{0, 3}, {5, 1}, {5, 0.5}}, 6, 5.5},
		{"overspent", 0.99, 1000, []rec{{1, 12}}, 2, -2},
		{"negative and NaN ticks ignored", 0.99, 1000, []rec{{3, -4}, {4, math.NaN()}, {-1, 5}}, 5, 10},
		// 720 buckets of 2 ticks: the window ending at tick 1500 holds
		// buckets 31..750, ticks 62..1501.
		{"rolled out", 0.9, 1440, []rec{{10, 40}, {61, 5}, {62, 7}, {1400, 1}}, 1500, 144 - 8},
		{"all rolled out after a long gap", 0.9, 1440, []rec{{10, 40}, {700, 9}}, 10_000, 144},
		{"the run's own budget (window = run)", 0.99, 20_000, []rec{{0, 20}, {19_999, 30}}, 19_999, 150},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewErrorBudget(tt.goal, tt.window)
			if !b.Valid() {
				t.Fatal("not valid")
			}
			for _, r := range tt.recs {
				b.Record(r.tick, r.short)
			}
			if got := b.Left(tt.at); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("Left(%d) = %g, want %g", tt.at, got, tt.want)
			}
		})
	}
	for _, bad := range []struct {
		goal   float64
		window int
	}{{0, 100}, {1, 100}, {-0.5, 100}, {math.NaN(), 100}, {0.99, 0}} {
		b := NewErrorBudget(bad.goal, bad.window)
		b.Record(1, 5)
		if b.Valid() || b.Left(2) != 0 {
			t.Errorf("NewErrorBudget(%g, %d): valid %v, left %g; want no budget", bad.goal, bad.window, b.Valid(), b.Left(2))
		}
	}
	// A tick behind the window is not charged to a newer bucket.
	b := NewErrorBudget(0.9, 1440)
	b.Record(2000, 1)
	b.Record(10, 50)
	if got := b.Left(2000); math.Abs(got-143) > 1e-9 {
		t.Errorf("late record: Left = %g, want 143", got)
	}
}

// With its error budget spent the adaptive policy hedges against losses it
// would risk with budget to spare: two calm zones of four, each losing its
// capacity about once per 800 ticks (a 1.4% chance within a ready delay of
// 11 ticks, under Risk), hold the target on spot with only the Spare on
// demand; with less than one ready delay of budget left the same plan is
// ten times too risky.
func TestAdaptiveInferenceSpendsItsErrorBudget(t *testing.T) {
	zone := Zone{Pool: Pool{Available: true, MeanUp: 800, Run: 800, Frac: 1}, Capacity: 4, Spot: 3, SpotReady: 3}
	decide := func(budgeted bool, left float64) Fleet { return decideWithBudget(zone, 2, budgeted, left) }
	base := decide(false, 0)
	if base.OnDemand > DefaultAdaptiveInferenceConfig().Spare {
		t.Fatalf("no budget: %v spot, %d on-demand; want at most the Spare on demand", base.Spot, base.OnDemand)
	}
	for _, left := range []float64{100, 2 * 10} {
		if f := decide(true, left); f.OnDemand != base.OnDemand || sum(f.Spot) != sum(base.Spot) {
			t.Errorf("budget left %g ticks (≥ 2 ready delays): %v spot, %d on-demand; want as without one (%v, %d)", left, f.Spot, f.OnDemand, base.Spot, base.OnDemand)
		}
	}
	for _, left := range []float64{5, 0, -30} {
		if f := decide(true, left); f.OnDemand <= base.OnDemand {
			t.Errorf("budget left %g ticks: %v spot, %d on-demand; want more on demand than %d", left, f.Spot, f.OnDemand, base.OnDemand)
		}
	}
}

// With less than a ready delay of budget left the policy takes a zone's
// losses to come in bursts: a 4-node zone calm for 3,000 ticks that lost
// two replicas 100 ticks ago is, by its whole record, about as safe as
// before (a 0.7% chance of a loss within the ready delay), and then hedged
// for, as the time since its last loss says (about 16%).
func TestAdaptiveInferenceWaryWithoutBudget(t *testing.T) {
	run := func(left float64) (fail float64, f Fleet) {
		a := NewAdaptiveInference(DefaultAdaptiveInferenceConfig())
		s := &InferenceState{Gap: 30, Target: 4, ReadyDelay: 600, SpotPrice: 1, OnDemandPrice: 3}
		for i := range 3100 {
			c := 4
			if i >= 3000 && i < 3020 {
				c = 2
			}
			s.Tick = i
			s.Zones = []Zone{
				{Pool: Pool{Available: true, MeanUp: float64(i + 1), Run: i}, Capacity: c, Spot: min(c, 4), SpotReady: min(c, 4)},
				{Pool: Pool{Available: true, MeanUp: float64(i + 1), Run: i}, Capacity: 1, Spot: 1, SpotReady: 1},
			}
			s.Budgeted, s.BudgetLeft = i == 3099, left
			f = a.Decide(s)
		}
		surv := a.survival(s, 0, 4)
		return 1 - surv[4], f
	}
	calm, fCalm := run(1000)
	wary, fWary := run(10)
	if calm > 0.02 || wary < 0.08 {
		t.Errorf("chance the zone loses some of 4 within the ready delay: %.4f with budget, %.4f without; want under 0.02 and over 0.08", calm, wary)
	}
	if fWary.OnDemand <= fCalm.OnDemand {
		t.Errorf("on demand %d without budget, %d with; want more without", fWary.OnDemand, fCalm.OnDemand)
	}
	t.Logf("loss chance %.4f → %.4f; decision %v+%d → %v+%d", calm, wary, fCalm.Spot, fCalm.OnDemand, fWary.Spot, fWary.OnDemand)
}

// With most of its error budget left the adaptive policy takes twice the
// Risk: three zones of two replicas, each losing its capacity about once
// per 200 ticks, are hedged by the whole target on demand without a
// budget or with less than Ample ready delays of it left (the chance of a
// loss the hedge does not cover is over Risk), and by less with more.
func TestAdaptiveInferenceAmpleBudget(t *testing.T) {
	zone := Zone{Pool: Pool{Available: true, MeanUp: 200, Run: 200, Frac: 1}, Capacity: 2, Spot: 2, SpotReady: 2}
	decide := func(budgeted bool, left float64) Fleet { return decideWithBudget(zone, 3, budgeted, left) }
	ample := decide(true, 11*(DefaultAdaptiveInferenceConfig().Ample+1))
	if ample.OnDemand >= 4 {
		t.Errorf("ample budget: %v spot, %d on-demand; want less than the target on demand", ample.Spot, ample.OnDemand)
	}
	for _, c := range []struct {
		budgeted bool
		left     float64
	}{{false, 0}, {true, 11 * 5}, {true, 11 * (DefaultAdaptiveInferenceConfig().Ample - 1)}} {
		if f := decide(c.budgeted, c.left); f.OnDemand <= ample.OnDemand {
			t.Errorf("budgeted %v, %g ticks left: %v spot, %d on-demand; want more on demand than with an ample budget (%d)", c.budgeted, c.left, f.Spot, f.OnDemand, ample.OnDemand)
		}
	}
}

func TestBudgetShare(t *testing.T) {
	for _, c := range []struct {
		budgeted      bool
		left          float64 // ticks; a ready delay is 10 of them
		budget, ample float64
		want          float64
	}{
		{false, 0, 2, 10, 1},
		{true, 101, 2, 10, ampleRiskShare},
		{true, 100, 2, 10, 1},
		{true, 101, 2, 0, 1},
		{true, 101, 0, 10, ampleRiskShare},
		{true, 30, 2, 10, 1},
		{true, 10, 2, 10, 0.5},
		{true, 0, 2, 10, minBudgetRisk},
		{true, -50, 2, 10, minBudgetRisk},
		{true, 5, 0, 10, 1},
	} {
		s := &InferenceState{Gap: 60, ReadyDelay: 600, Budgeted: c.budgeted, BudgetLeft: c.left}
		if got := budgetShare(s, c.budget, c.ample); got != c.want {
			t.Errorf("budgeted %v, %g ticks left, budget %g, ample %g: share %g, want %g", c.budgeted, c.left, c.budget, c.ample, got, c.want)
		}
	}
}

// decideWithBudget is the default adaptive policy's decision for a service
// of target 4 (one-minute ticks, ten-minute ready delay, spot a third of
// on-demand) running one on-demand replica beside zones copies of zone,
// with budget left ticks of its error budget when budgeted.
func decideWithBudget(zone Zone, zones int, budgeted bool, left float64) Fleet {
	a := NewAdaptiveInference(DefaultAdaptiveInferenceConfig())
	s := &InferenceState{Gap: 60, Target: 4, ReadyDelay: 600, SpotPrice: 1, OnDemandPrice: 3, Budgeted: budgeted, BudgetLeft: left}
	for range zones {
		s.Zones = append(s.Zones, zone)
	}
	s.OnDemand, s.OnDemandReady = 1, 1
	return a.Decide(s)
}
