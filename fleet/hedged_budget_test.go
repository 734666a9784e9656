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

// TestHedgedSourceScaleUpIsNoShortfall: when the autoscaler raises the
// target, the service is held to the old one for a ready delay (the new
// replicas cannot be ready sooner), so scaling up spends no budget; being
// below the old target still does.
func TestHedgedSourceScaleUpIsNoShortfall(t *testing.T) {
	w, h := newHedgeWorld(t, policy.SpotPrefer)
	h.Policy().Workloads[0].Availability = policy.Availability{Goal: 0.99, Window: 30 * 24 * time.Hour}
	w.step(h, 240, nil)
	hg := h.hedges["chat"]
	before := hg.budget.Left(hg.tick)
	h.Inner = fixedPlan{hedgePlan(8)}
	w.step(h, 30, nil)
	if d := h.Decisions()["chat"]; d.Target != 8 || d.Ready < 8 {
		t.Fatalf("after scaling up: %+v; want 8 ready", d)
	}
	if got := hg.budget.Left(hg.tick); got != before {
		t.Fatalf("scaling 4 → 8 spent budget: %.1f → %.1f ticks left", before, got)
	}
	// Every zone fails: the service is below the target it held.
	for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		w.fail(z)
	}
	w.step(h, 30, nil)
	if got := hg.budget.Left(hg.tick); got >= before {
		t.Fatalf("zones failed: budget left %.1f ticks, want less than %.1f", got, before)
	}
}
