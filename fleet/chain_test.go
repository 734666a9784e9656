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
	c.Load = AgentLoad{Agents: agentsList{}}
	c.SpotOnly = func(context.Context, policy.Workload, time.Time) bool { return false }
	c.Fleet = &hedgeWorld{}
	c.Hedge = HedgeOptions{Tick: 30 * time.Second, ReadyDelay: 5 * time.Minute, MaxZones: 2}
	h, ok := NewPlanChain(c).(*HedgedSource)
	if !ok || h.Tick != 30*time.Second || h.ReadyDelay != 5*time.Minute || h.MaxZones != 2 {
		t.Fatalf("outer stage %T %+v", h, h)
	}
	sc, ok := h.Inner.(*ScaledSource)
	if !ok {
		t.Fatalf("under hedging: %T", h.Inner)
	}
	so, ok := sc.Inner.(*SpotOnlySource)
	if !ok {
		t.Fatalf("under scaling: %T", sc.Inner)
	}
	if _, ok := so.Inner.(*SolverSource); !ok {
		t.Fatalf("under spot-only: %T", so.Inner)
	}
	if sc.Policy() != pol || h.Policy() != pol {
		t.Fatal("stages do not read the spot-only stage's policy")
	}
}
