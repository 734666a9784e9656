package fleet

import (
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/policy"
)

// TestHedgedSourceSpendsErrorBudget: the live fleet keeps each service's
// availability goal's error budget as the simulator does and tells the
// policy what is left. A service that spent its budget starting cold (a
// ready delay below target, out of 14 minutes that 99% of a day allows)
// hedges harder on the same calm pools than one without a goal, and the
// budget comes back as the start rolls out of the window.
func TestHedgedSourceSpendsErrorBudget(t *testing.T) {
	run := func(a policy.Availability) (od int, left float64, h *HedgedSource, w *hedgeWorld) {
		w, h = newHedgeWorld(t, policy.SpotPrefer)
		pol := h.Policy()
		pol.Workloads[0].Availability = a
		p := w.step(h, 240, nil)
		_, od, _ = capacities(p)
		hg := h.hedges["chat"]
		return od, hg.budget.Left(hg.tick), h, w
	}
	odFree, _, _, _ := run(policy.Availability{})
	odTight, left, h, w := run(policy.Availability{Goal: 0.99, Window: 24 * time.Hour})
	t.Logf("on demand %d without a goal, %d with; budget left %.2f", odFree, odTight, left)
	if left > 5 || left < 0 {
		t.Fatalf("budget left after a cold start: %.1f ticks; want 14.4 less the ready delay (and the tick it took to launch)", left)
	}
	if odTight <= odFree {
		t.Fatalf("on demand with the budget spent: %d; want more than without a goal (%d)", odTight, odFree)
	}
	// A day later the cold start has left the window.
	w.step(h, 24*60, nil)
	hg := h.hedges["chat"]
	if got := hg.budget.Left(hg.tick); got < 14 {
		t.Fatalf("a day later: budget left %.1f ticks; want the day's whole 14.4", got)
	}
}
