package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// APIPlan converts the optimizer's plan into its wire form. The two have
// the same JSON shape (TestAPIPlanMatchesOptimizer checks every field), so
// the conversion goes through JSON and is strict: a field the optimizer adds
// without apiv1 knowing it is an error here, not a silent loss.
func APIPlan(p *optimizer.Plan) (apiv1.Plan, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return apiv1.Plan{}, fmt.Errorf("encoding plan: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var out apiv1.Plan
	if err := dec.Decode(&out); err != nil {
		return apiv1.Plan{}, fmt.Errorf("plan does not fit apiv1.Plan: %w", err)
	}
	return out, nil
}

// OptimizerPlan is the PlanFunc of the real broker: policy.Parse then
// optimizer.Solve. Policy errors (file:line:col) and infeasible plans are
// reported to the API caller; nothing here decides placements.
//
// extra are workloads registered through the API; they are planned with
// the file's (a name the file already uses is left out and reported in
// PlanResult.Skipped), under the file's clouds, regions, quotas and
// budgets.
func OptimizerPlan(ctx context.Context, name string, data []byte, extra []policy.Workload, cat *pricing.Catalog, now time.Time) (PlanResult, error) {
	pol, err := policy.Parse(name, data)
	if err != nil {
		var el policy.ErrorList
		if errors.As(err, &el) {
			return PlanResult{}, fmt.Errorf("%w: %s", policy.ErrInvalid, el.Error())
		}
		return PlanResult{}, fmt.Errorf("%w: %v", policy.ErrInvalid, err)
	}
	var skipped []string
	if len(extra) > 0 {
		pol, skipped = pol.WithWorkloads(extra)
	}
	plan, err := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: pol, Now: now, Speeds: speedsFor(ctx)})
	if err != nil && (plan == nil || !errors.Is(err, optimizer.ErrInfeasible)) {
		// Nothing could be placed: optimizer.ErrInfeasible stays in the
		// chain and the API answers 422.
		return PlanResult{}, fmt.Errorf("planning %s: %w", name, err)
	}
	// Some workloads blocked: the plan of the rest is served, its blocked
	// list naming each one and its constraint (one infeasible workload
	// never hides the feasible rest).
	view := apiv1.Budgets{Policy: name, HorizonHours: plan.HorizonHours, GeneratedAt: plan.GeneratedAt, Budgets: []apiv1.BudgetStatus{}}
	team := map[string]string{}
	for _, w := range pol.Workloads {
		team[w.Name] = w.Team
	}
	for _, b := range pol.Budgets {
		st := apiv1.BudgetStatus{Name: b.Name, Team: b.Team, Workload: b.Workload, MonthlyUSD: b.MonthlyUSD, Workloads: []string{}}
		for _, p := range plan.Placements {
			if (b.Workload == "" || b.Workload == p.Workload) && (b.Team == "" || b.Team == team[p.Workload]) {
				st.PlannedUSD += p.ExpectedCost
				st.Workloads = append(st.Workloads, p.Workload)
			}
		}
		view.Budgets = append(view.Budgets, st)
	}
	ap, err := APIPlan(plan)
	if err != nil {
		return PlanResult{}, err
	}
	return PlanResult{Plan: ap, CostUSD: plan.Totals.ExpectedCost, Budgets: view, Skipped: skipped}, nil
}

type speedsKey struct{}

// withSpeeds hands the planner's speed table (measured by agents) to the
// PlanFunc of this one planning call.
func withSpeeds(ctx context.Context, t optimizer.SpeedTable) context.Context {
	return context.WithValue(ctx, speedsKey{}, t)
}

// speedsFor is the speed table for this planning call: measured where the
// planner supplied one, else the spec sheets.
func speedsFor(ctx context.Context) optimizer.SpeedTable {
	if t, ok := ctx.Value(speedsKey{}).(optimizer.SpeedTable); ok {
		return t
	}
	return optimizer.DefaultSpeeds()
}
