package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// TestNewPlanChainStages: the stages wrap each other in the documented
// order, later stages read the spot-only stage's policy, and optional ones
// stay out when not configured.
func TestNewPlanChainStages(t *testing.T) {
	pol := hedgePolicy(policy.SpotPrefer)
	cat := hedgeCatalog()
	c := ChainConfig{Catalog: func() *pricing.Catalog { return cat }, Policy: func() *policy.Policy { return pol }, Now: time.Now}
	if _, ok := NewPlanChain(c).(*SolverSource); !ok {
		t.Fatal("bare chain is not the solver")
	}
	// Fleet without Hedge: training stage, no hedging.
	c.Fleet = &hedgeWorld{}
	if _, ok := NewPlanChain(c).(*TrainingSource); !ok {
		t.Fatal("fleet without hedge options: hedging on")
	}
	c.Load = AgentLoad{Agents: agentsList{}}
	c.SpotOnly = func(context.Context, policy.Workload, time.Time) bool { return false }
	c.Hedge = &HedgeOptions{Tick: 30 * time.Second, ReadyDelay: 5 * time.Minute, MaxZones: 2}
	h, ok := NewPlanChain(c).(*HedgedSource)
	if !ok || h.Tick != 30*time.Second || h.ReadyDelay != 5*time.Minute || h.MaxZones != 2 {
		t.Fatalf("outer stage %T %+v", h, h)
	}
	sc, ok := h.Inner.(*ScaledSource)
	if !ok {
		t.Fatalf("under hedging: %T", h.Inner)
	}
	tr, ok := sc.Inner.(*TrainingSource)
	if !ok {
		t.Fatalf("under scaling: %T", sc.Inner)
	}
	so, ok := tr.Inner.(*SpotOnlySource)
	if !ok {
		t.Fatalf("under training: %T", tr.Inner)
	}
	if _, ok := so.Inner.(*SolverSource); !ok {
		t.Fatalf("under spot-only: %T", so.Inner)
	}
	if sc.Policy() != pol || h.Policy() != pol || tr.Policy() != pol {
		t.Fatal("stages do not read the spot-only stage's policy")
	}
}
