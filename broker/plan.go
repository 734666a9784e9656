package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// BudgetStatus is one policy budget next to what the current plan expects
// to spend under it.
type BudgetStatus struct {
	Name       string  `json:"name"`
	Team       string  `json:"team,omitempty"`
	Workload   string  `json:"workload,omitempty"`
	MonthlyUSD float64 `json:"monthly_usd"`
	// PlannedUSD sums the expected cost of the placements the budget covers
	// (jobs: the whole run; inference: the policy horizon).
	PlannedUSD float64  `json:"planned_usd"`
	Workloads  []string `json:"workloads"`
}

// BudgetsView is the budgets route's answer.
type BudgetsView struct {
	Policy       string         `json:"policy"`
	HorizonHours float64        `json:"horizon_hours"`
	GeneratedAt  time.Time      `json:"generated_at"`
	Budgets      []BudgetStatus `json:"budgets"`
}

// OptimizerPlan is the PlanFunc of the real broker: policy.Parse then
// optimizer.Solve. Policy errors (file:line:col) and infeasible plans are
// reported to the API caller; nothing here decides placements.
func OptimizerPlan(_ context.Context, name string, data []byte, cat *pricing.Catalog, now time.Time) (PlanResult, error) {
	pol, err := policy.Parse(name, data)
	if err != nil {
		var el policy.ErrorList
		if errors.As(err, &el) {
			return PlanResult{}, fmt.Errorf("%w: %s", httpapi.ErrInvalidInput, el.Error())
		}
		return PlanResult{}, fmt.Errorf("%w: %v", httpapi.ErrInvalidInput, err)
	}
	plan, err := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: pol, Now: now})
	if err != nil {
		if errors.Is(err, optimizer.ErrInfeasible) {
			// %w twice: the API matches ErrInfeasible, the dashboard reads
			// the *optimizer.InfeasibleError's blocked workloads.
			return PlanResult{}, fmt.Errorf("%w: %w", httpapi.ErrInfeasible, err)
		}
		return PlanResult{}, fmt.Errorf("planning %s: %w", name, err)
	}
	view := BudgetsView{Policy: name, HorizonHours: plan.HorizonHours, GeneratedAt: plan.GeneratedAt, Budgets: []BudgetStatus{}}
	team := map[string]string{}
	for _, w := range pol.Workloads {
		team[w.Name] = w.Team
	}
	for _, b := range pol.Budgets {
		st := BudgetStatus{Name: b.Name, Team: b.Team, Workload: b.Workload, MonthlyUSD: b.MonthlyUSD, Workloads: []string{}}
		for _, p := range plan.Placements {
			if (b.Workload == "" || b.Workload == p.Workload) && (b.Team == "" || b.Team == team[p.Workload]) {
				st.PlannedUSD += p.ExpectedCost
				st.Workloads = append(st.Workloads, p.Workload)
			}
		}
		view.Budgets = append(view.Budgets, st)
	}
	return PlanResult{Plan: plan, CostUSD: plan.Totals.ExpectedCost, Budgets: view}, nil
}
