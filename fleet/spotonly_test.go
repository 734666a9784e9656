package fleet

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// policyEcho plans one placement per workload, on spot where the policy
// it reads says only, and fails when told to for a spot-only policy.
type policyEcho struct {
	pol      func() *policy.Policy
	seen     []*policy.Policy
	failSpot bool
}

func (e *policyEcho) Plan(context.Context, *Unavailable) (*optimizer.Plan, error) {
	pol := e.pol()
	e.seen = append(e.seen, pol)
	plan := &optimizer.Plan{}
	for _, w := range pol.Workloads {
		ct := pricing.OnDemand
		if w.Spot == policy.SpotOnly {
			if e.failSpot {
				return nil, errors.New("infeasible on spot")
			}
			ct = pricing.Spot
		}
		plan.Placements = append(plan.Placements, optimizer.Placement{Workload: w.Name, Capacity: ct})
	}
	return plan, nil
}

// TestSpotOnlySource: a spent spot-only budget moves its spot-prefer
// workloads to spot only until the month ends; spot never stays never; a
// workload with no spot offer stays, and the log says so once a month; a
// spot plan that cannot be made falls back to the policy as written.
func TestSpotOnlySource(t *testing.T) {
	base := &policy.Policy{Workloads: []policy.Workload{
		{Name: "chat", Kind: policy.Inference, Spot: policy.SpotPrefer, GPU: policy.GPUNeed{Models: []pricing.GPUModel{pricing.T4}, Count: 1}},
		{Name: "embed", Kind: policy.Batch, Spot: policy.SpotPrefer, GPU: policy.GPUNeed{Models: []pricing.GPUModel{pricing.T4}, Count: 2}},
		{Name: "legacy", Kind: policy.Inference, Spot: policy.SpotNever, GPU: policy.GPUNeed{Models: []pricing.GPUModel{pricing.T4}, Count: 1}},
		{Name: "big", Kind: policy.Training, Spot: policy.SpotPrefer, GPU: policy.GPUNeed{Models: []pricing.GPUModel{pricing.H100}, Count: 8}},
		{Name: "eu", Kind: policy.Inference, Spot: policy.SpotPrefer, GPU: policy.GPUNeed{Models: []pricing.GPUModel{pricing.A10G}, Count: 1},
			Limits: policy.Limits{Regions: []string{"eu-*"}}},
	}}
	cat := hedgeCatalog()
	now := time.Date(2026, 12, 20, 0, 0, 0, 0, time.UTC)
	spent := map[string]bool{"chat": true, "embed": true, "legacy": true, "big": true, "eu": true}
	var logs bytes.Buffer
	s := &SpotOnlySource{Policy: func() *policy.Policy { return base }, Catalog: func() *pricing.Catalog { return cat },
		SpotOnly: func(_ context.Context, w policy.Workload, _ time.Time) bool { return spent[w.Name] },
		Now:      func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	inner := &policyEcho{pol: s.Current}
	s.Inner = inner
	plan, err := s.Plan(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]pricing.CapacityType{}
	for _, p := range plan.Placements {
		got[p.Workload] = p.Capacity
	}
	want := map[string]pricing.CapacityType{"chat": pricing.Spot, "embed": pricing.Spot, "legacy": pricing.OnDemand,
		"big": pricing.OnDemand, "eu": pricing.OnDemand}
	for w, ct := range want {
		if got[w] != ct {
			t.Errorf("%s planned %s, want %s", w, got[w], ct)
		}
	}
	if base.Workloads[0].Spot != policy.SpotPrefer {
		t.Fatal("the user's policy was changed")
	}
	// The same derived policy (pointer) while nothing changes: the solver
	// does not re-solve every pass.
	if _, err := s.Plan(context.Background(), nil); err != nil || inner.seen[0] != inner.seen[1] || inner.seen[0] == base {
		t.Fatalf("derived policy not kept: %v", err)
	}
	for _, w := range []string{"big", "eu"} {
		if n := strings.Count(logs.String(), "no spot offer fits the workload; it stays as planned\" workload="+w); n != 1 {
			t.Errorf("%s: said %d times, want once\n%s", w, n, logs.String())
		}
	}
	// Next month the budget starts over: the policy as written.
	now = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	clear(spent)
	if _, err := s.Plan(context.Background(), nil); err != nil || s.Current() != base {
		t.Fatalf("new month: still moved (%v)", err)
	}
	// A spot plan that cannot be made: the policy as written.
	spent["chat"] = true
	inner.failSpot = true
	plan, err = s.Plan(context.Background(), nil)
	if err != nil || plan.Placements[0].Capacity != pricing.OnDemand || s.Current() != base {
		t.Fatalf("fallback: %v %+v", err, plan)
	}
}
