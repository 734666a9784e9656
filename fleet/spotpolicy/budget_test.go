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
	decide := func(budgeted bool, left float64) Fleet {
		a := NewAdaptiveInference(DefaultAdaptiveInferenceConfig())
		s := &InferenceState{Gap: 60, Target: 4, ReadyDelay: 600, SpotPrice: 1, OnDemandPrice: 3, Budgeted: budgeted, BudgetLeft: left}
		for range 2 {
			s.Zones = append(s.Zones, Zone{Pool: Pool{Available: true, MeanUp: 800, Run: 800, Frac: 1}, Capacity: 4, Spot: 3, SpotReady: 3})
		}
		s.OnDemand, s.OnDemandReady = 1, 1
		return a.Decide(s)
	}
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
