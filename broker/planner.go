package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// PlanResult is what one planning run yields.
type PlanResult struct {
	// Plan is the optimizer's plan in its wire form.
	Plan apiv1.Plan
	// CostUSD is the plan's expected cost (for the metric).
	CostUSD float64
	// Budgets is the policy's budgets with their planned spending.
	Budgets apiv1.Budgets
}

// PlanFunc parses a policy file and plans it against the catalog. Errors
// about the policy itself must wrap policy.ErrInvalid; infeasible plans
// optimizer.ErrInfeasible.
type PlanFunc func(ctx context.Context, name string, policy []byte, cat *pricing.Catalog, now time.Time) (PlanResult, error)

// policyPlanner implements httpapi.Planner for the loaded policy, caching
// the latest plan that the re-plan job computes.
type policyPlanner struct {
	plan       PlanFunc
	catalog    func() *pricing.Catalog
	now        func() time.Time
	policyName string
	policy     []byte
	metrics    *httpapi.Metrics

	mu     sync.Mutex
	latest *PlanResult
}

var _ httpapi.Planner = (*policyPlanner)(nil)

func (p *policyPlanner) Plan(ctx context.Context, name string, data []byte) (apiv1.Plan, error) {
	r, err := p.plan(ctx, name, data, p.catalog(), p.now())
	if err != nil {
		return apiv1.Plan{}, err
	}
	return r.Plan, nil
}

func (p *policyPlanner) current(ctx context.Context) (*PlanResult, error) {
	if p.policy == nil {
		return nil, fmt.Errorf("%w: start the broker with -f policy.yaml or POST a policy to /api/v1/plan", policy.ErrNoPolicy)
	}
	p.mu.Lock()
	latest := p.latest
	p.mu.Unlock()
	if latest != nil {
		return latest, nil
	}
	if err := p.replan(ctx); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latest, nil
}

func (p *policyPlanner) Current(ctx context.Context) (apiv1.Plan, error) {
	r, err := p.current(ctx)
	if err != nil {
		return apiv1.Plan{}, err
	}
	return r.Plan, nil
}

func (p *policyPlanner) Budgets(ctx context.Context) (apiv1.Budgets, error) {
	r, err := p.current(ctx)
	if err != nil {
		return apiv1.Budgets{}, err
	}
	return r.Budgets, nil
}

// replan is the re-plan job: plan the loaded policy on the current catalog.
func (p *policyPlanner) replan(ctx context.Context) error {
	if p.policy == nil {
		return nil
	}
	r, err := p.plan(ctx, p.policyName, p.policy, p.catalog(), p.now())
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.latest = &r
	p.mu.Unlock()
	p.metrics.SetPlanCost(r.CostUSD)
	return nil
}
