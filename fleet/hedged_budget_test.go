package fleet

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/store"
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
		return od, hg.budget.Left(hg.budgetAt), h, w
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
	if got := hg.budget.Left(hg.budgetAt); got < 14 {
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
	before := hg.budget.Left(hg.budgetAt)
	h.Inner = fixedPlan{hedgePlan(8)}
	w.step(h, 30, nil)
	if d := h.Decisions()["chat"]; d.Target != 8 || d.Ready < 8 {
		t.Fatalf("after scaling up: %+v; want 8 ready", d)
	}
	if got := hg.budget.Left(hg.budgetAt); got != before {
		t.Fatalf("scaling 4 → 8 spent budget: %.1f → %.1f ticks left", before, got)
	}
	// Every zone fails: the service is below the target it held.
	for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		w.fail(z)
	}
	w.step(h, 30, nil)
	if got := hg.budget.Left(hg.budgetAt); got >= before {
		t.Fatalf("zones failed: budget left %.1f ticks, want less than %.1f", got, before)
	}
}

// flakyShortfall is a store whose reads and writes fail while told to.
type flakyShortfall struct {
	ShortfallStore
	failReads, failWrites int // calls left to fail
	reads, writes         int
}

func (f *flakyShortfall) RecordShortfall(ctx context.Context, recs []store.ShortfallRecord) error {
	f.writes++
	if f.failWrites > 0 {
		f.failWrites--
		return errors.New("store unavailable")
	}
	return f.ShortfallStore.RecordShortfall(ctx, recs)
}

func (f *flakyShortfall) Shortfall(ctx context.Context, workload string, since time.Time) ([]store.ShortfallRecord, error) {
	f.reads++
	if f.failReads > 0 {
		f.failReads--
		return nil, errors.New("store unavailable")
	}
	return f.ShortfallStore.Shortfall(ctx, workload, since)
}

// TestHedgedSourceBudgetOutlivesTheLeader: with the store keeping the
// services' time below target, a new leader's hedge starts from the budget
// the old leader left, not a whole one, and records a failed write held
// back are written once the store answers again.
func TestHedgedSourceBudgetOutlivesTheLeader(t *testing.T) {
	ctx := t.Context()
	_, _, fst := openStore(t, filepath.Join(t.TempDir(), "fleet.db"))
	day := policy.Availability{Goal: 0.99, Window: 24 * time.Hour}
	w, h := newHedgeWorld(t, policy.SpotPrefer)
	h.Policy().Workloads[0].Availability = day
	// The store is down for the cold start's writes.
	flaky := &flakyShortfall{ShortfallStore: fst, failWrites: 5}
	h.Shortfall = flaky
	w.step(h, 240, nil)
	hg := h.hedges["chat"]
	left := hg.budget.Left(hg.budgetAt)
	if left > 5 || left < 0 {
		t.Fatalf("budget left after a cold start: %.1f ticks; want 14.4 less the ready delay", left)
	}
	recs, err := fst.Shortfall(ctx, "chat", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	stored := 0.0
	for _, r := range recs {
		stored += r.Seconds / 60
	}
	if math.Abs(stored-(14.4-left)) > 1e-9 || flaky.writes < 6 {
		t.Fatalf("stored %.2f ticks below target in %d rows after %d writes (5 failed); want the %.2f the budget spent", stored, len(recs), flaky.writes, 14.4-left)
	}

	// A new leader, its first read of the store failing: it counts only
	// its own until a read succeeds, then the old leader's too.
	next := func(s ShortfallStore) *HedgedSource {
		return &HedgedSource{Inner: h.Inner, Catalog: h.Catalog, Policy: h.Policy, Fleet: w, Now: h.Now, Tick: h.Tick,
			ReadyDelay: h.ReadyDelay, Shortfall: s}
	}
	h2 := next(&flakyShortfall{ShortfallStore: fst, failReads: 1})
	w.step(h2, 1, nil)
	hg2 := h2.hedges["chat"]
	if got := hg2.budget.Left(hg2.budgetAt); got < 14.4-1e-9 {
		t.Fatalf("new leader, store unread: budget left %.2f, want the whole 14.4 (nothing of its own spent)", got)
	}
	w.step(h2, 1, nil)
	if got := hg2.budget.Left(hg2.budgetAt); math.Abs(got-left) > 1e-9 {
		t.Fatalf("new leader after reading the store: budget left %.2f ticks, want the old leader's %.2f", got, left)
	}
	// Without the store a new leader starts with the whole budget (the
	// behaviour before), so the check above can fail.
	h3 := next(nil)
	w.step(h3, 1, nil)
	if hg3 := h3.hedges["chat"]; hg3.budget.Left(hg3.budgetAt) < 14.4-1e-9 {
		t.Fatalf("without a store: budget left %.2f", hg3.budget.Left(hg3.budgetAt))
	}
}

// TestShortfallKeptForTheLongestWindow: the store keeps services' time
// below target as long as the longest window a policy may give, so no
// budget is ever read short.
func TestShortfallKeptForTheLongestWindow(t *testing.T) {
	if store.ShortfallKeep != policy.MaxAvailabilityWindow {
		t.Fatalf("store keeps shortfall %s, the longest availability.window is %s", store.ShortfallKeep, policy.MaxAvailabilityWindow)
	}
}
