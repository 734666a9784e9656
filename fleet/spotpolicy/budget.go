package spotpolicy

import "math"

// ErrorBudget keeps an inference service's availability goal's error
// budget: the goal holds the service at its target a share Goal of the
// time over any Window ticks, so it may spend (1-Goal)·Window ticks below
// target in that window. Record what each tick spent; Left says what is
// still allowed. The simulator and the live fleet keep one per service,
// so the policy sees the same figure in both (InferenceState.BudgetLeft).
//
// The window rolls in buckets of Window/budgetBuckets ticks (a month of
// one-minute ticks is 43,200 of them; a per-tick ring would be as long);
// a window at least as long as the run is the run's own budget, as the
// simulator measures it.
type ErrorBudget struct {
	Goal   float64 // share of time at target wanted, in (0, 1)
	Window int     // ticks the goal is measured over, rolling

	width   int       // ticks per bucket
	buckets []float64 // ticks short per bucket, a ring
	first   int       // the oldest bucket's number (its first tick / width)
	spent   float64   // the ring's sum
}

// budgetBuckets is how many buckets a window is kept in.
const budgetBuckets = 720

// NewErrorBudget is the budget of goal over window ticks. A goal outside
// (0, 1) or a window under one tick is no budget (Valid is false).
func NewErrorBudget(goal float64, window int) ErrorBudget {
	b := ErrorBudget{Goal: goal, Window: window}
	if b.Valid() {
		b.width = max(1, (window+budgetBuckets-1)/budgetBuckets)
		b.buckets = make([]float64, (window+b.width-1)/b.width)
	}
	return b
}

// Valid says whether the budget has a goal to keep.
func (b *ErrorBudget) Valid() bool {
	return b.Goal > 0 && b.Goal < 1 && b.Window >= 1 && !math.IsNaN(b.Goal)
}

// Record adds short ticks spent below target at tick (0 ≤ short; ticks in
// the order they come, the same tick again adds to it).
func (b *ErrorBudget) Record(tick int, short float64) {
	if len(b.buckets) == 0 || tick < 0 || !(short > 0) {
		return
	}
	b.advance(tick)
	if tick/b.width < b.first {
		return // (out of the window already)
	}
	b.buckets[(tick/b.width)%len(b.buckets)] += short
	b.spent += short
}

// Left is how many ticks below target the goal still allows in the window
// that ends at tick: negative once it is spent. Zero without a budget.
func (b *ErrorBudget) Left(tick int) float64 {
	if len(b.buckets) == 0 {
		return 0
	}
	b.advance(max(0, tick))
	return (1-b.Goal)*float64(b.Window) - b.spent
}

// advance drops the buckets that fell out of the window ending at tick.
func (b *ErrorBudget) advance(tick int) {
	n := len(b.buckets)
	last := tick / b.width
	if last-b.first < n {
		return
	}
	if last-b.first >= 2*n {
		clear(b.buckets) // (a long gap: everything fell out)
		b.spent, b.first = 0, last-n+1
		return
	}
	for ; b.first <= last-n; b.first++ {
		i := b.first % n
		b.spent -= b.buckets[i]
		b.buckets[i] = 0
	}
	b.spent = math.Max(0, b.spent) // (rounding)
}
