package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// PlanResult is what one planning run yields.
type PlanResult struct {
	// Plan is the optimizer's plan in its wire form.
	Plan apiv1.Plan
	// CostUSD is the plan's expected cost (for the metric).
	CostUSD float64
	// Budgets is the policy's budgets with their planned spending.
	Budgets apiv1.Budgets
	// Skipped names API workloads left out because the policy file has a
	// workload of the same name.
	Skipped []string
}

// PlanFunc parses a policy file, adds extra (workloads registered through
// the API) and plans them against the catalog. Errors about the policy
// itself must wrap policy.ErrInvalid; infeasible plans
// optimizer.ErrInfeasible.
type PlanFunc func(ctx context.Context, name string, policy []byte, extra []policy.Workload, cat *pricing.Catalog, now time.Time) (PlanResult, error)

// planStore is where plans are kept and API workloads are read.
type planStore interface {
	LoadPlan(ctx context.Context, name string) (store.PlanRecord, error)
	SavePlan(ctx context.Context, leaseName string, p store.PlanRecord, now time.Time) error
	ListWorkloads(ctx context.Context) ([]store.WorkloadRecord, error)
}

// policyPlanner implements httpapi.Planner for the loaded policy. The
// leader's re-plan job computes the plan of the policy file plus the API's
// workloads and stores it; every replica serves the stored plan, so all of
// them answer GET /api/v1/plan with the same placements and costs.
type policyPlanner struct {
	// speeds returns the measured speed table; nil plans on spec sheets.
	speeds func(ctx context.Context) optimizer.SpeedTable
	// spend adds the ledger's month-to-date figures to the budgets.
	spend      func(ctx context.Context, b apiv1.Budgets) (apiv1.Budgets, error)
	plan       PlanFunc
	catalog    func() *pricing.Catalog
	now        func() time.Time
	policyName string
	policy     []byte
	metrics    *httpapi.Metrics
	store      planStore
	// leading says whether this replica leads, as which holder and epoch.
	leading   func() (holder string, epoch int64, ok bool)
	leaseName string
	log       *slog.Logger

	// planned is the fingerprint of the API workloads the last stored plan
	// of this replica covers, lastFP that of the last computed plan (see
	// replanIfWorkloadsChanged).
	mu      sync.Mutex
	planned string
	lastFP  string
}

var _ httpapi.Planner = (*policyPlanner)(nil)

// policyID names the policy file and its content, so a stored plan shows
// which file (and which version of it) it was made from.
func (p *policyPlanner) policyID() string {
	sum := sha256.Sum256(p.policy)
	return p.policyName + " sha256:" + hex.EncodeToString(sum[:8])
}

// Plan plans a posted policy on its own (POST /api/v1/plan); nothing is
// stored.
func (p *policyPlanner) Plan(ctx context.Context, name string, data []byte) (apiv1.Plan, error) {
	r, err := p.plan(p.speedCtx(ctx), name, data, nil, p.catalog(), p.now())
	if err != nil {
		return apiv1.Plan{}, err
	}
	return r.Plan, nil
}

// current returns the stored plan. Before the leader has stored one (the
// first seconds of a new database) it computes one here without storing
// it, so the API answers at once.
func (p *policyPlanner) current(ctx context.Context) (store.PlanRecord, error) {
	if p.policy == nil {
		return store.PlanRecord{}, fmt.Errorf("%w: start the broker with -f policy.yaml or POST a policy to /api/v1/plan", policy.ErrNoPolicy)
	}
	rec, err := p.store.LoadPlan(ctx, store.CurrentPlan)
	if err == nil {
		return rec, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return store.PlanRecord{}, err
	}
	return p.compute(ctx)
}

// Current returns the stored plan as the API serves it. Every replica
// decodes the same stored JSON, so all of them answer with the same bytes.
func (p *policyPlanner) Current(ctx context.Context) (apiv1.Plan, error) {
	r, err := p.current(ctx)
	if err != nil {
		return apiv1.Plan{}, err
	}
	var out apiv1.Plan
	if err := json.Unmarshal(r.Plan, &out); err != nil {
		return apiv1.Plan{}, fmt.Errorf("decoding the stored plan: %w", err)
	}
	return out, nil
}

// Budgets returns the stored plan's budgets.
func (p *policyPlanner) Budgets(ctx context.Context) (apiv1.Budgets, error) {
	r, err := p.current(ctx)
	if err != nil {
		return apiv1.Budgets{}, err
	}
	var out apiv1.Budgets
	if err := json.Unmarshal(r.Budgets, &out); err != nil {
		return apiv1.Budgets{}, fmt.Errorf("decoding the stored budgets: %w", err)
	}
	if p.spend != nil {
		return p.spend(ctx, out)
	}
	return out, nil
}

// apiWorkloads turns the workloads stored through the API into policy
// workloads. The API checked each spec when it was written; one that no
// longer parses (written by an older broker) is left out and logged rather
// than blocking every other workload's plan.
func (p *policyPlanner) apiWorkloads(ctx context.Context) ([]policy.Workload, string, error) {
	recs, err := p.store.ListWorkloads(ctx)
	if err != nil {
		return nil, "", err
	}
	out := make([]policy.Workload, 0, len(recs))
	for _, r := range recs {
		w, err := policy.WorkloadFromJSON("workload "+r.Name, r.Name, r.Team, r.Kind, r.Spec)
		if err != nil {
			p.log.Warn("leaving an API workload out of the plan: its spec does not parse", "workload", r.Name, "err", err)
			continue
		}
		out = append(out, w)
	}
	return out, fingerprint(recs), nil
}

// fingerprint identifies a set of API workloads and their versions.
func fingerprint(recs []store.WorkloadRecord) string {
	h := sha256.New()
	for _, r := range recs {
		fmt.Fprintf(h, "%s\x00%d\x00", r.Name, r.UpdatedAt.UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// compute plans the policy file plus the API's workloads on the current
// catalog.
func (p *policyPlanner) compute(ctx context.Context) (store.PlanRecord, error) {
	extra, fp, err := p.apiWorkloads(ctx)
	if err != nil {
		return store.PlanRecord{}, err
	}
	defer func() {
		p.mu.Lock()
		p.lastFP = fp
		p.mu.Unlock()
	}()
	cat, now := p.catalog(), p.now().UTC()
	r, err := p.plan(p.speedCtx(ctx), p.policyName, p.policy, extra, cat, now)
	if err != nil {
		return store.PlanRecord{}, err
	}
	if len(r.Skipped) > 0 {
		p.log.Warn("API workloads left out of the plan: the policy file has workloads of the same names", "workloads", r.Skipped)
	}
	planJSON, err := json.Marshal(r.Plan)
	if err != nil {
		return store.PlanRecord{}, fmt.Errorf("encoding the plan: %w", err)
	}
	budgets, err := json.Marshal(r.Budgets)
	if err != nil {
		return store.PlanRecord{}, fmt.Errorf("encoding the budgets: %w", err)
	}
	return store.PlanRecord{Name: store.CurrentPlan, Policy: p.policyID(), Plan: planJSON, Budgets: budgets,
		CostUSD: r.CostUSD, CatalogAt: cat.GeneratedAt, PlannedAt: now}, nil
}

// replan is the leader's re-plan job: plan and store, fenced by the lease
// epoch so a deposed leader cannot overwrite its successor's plan.
func (p *policyPlanner) replan(ctx context.Context) error {
	if p.policy == nil {
		return nil
	}
	holder, epoch, ok := p.leading()
	if !ok {
		return nil
	}
	rec, err := p.compute(ctx)
	if err != nil {
		return err
	}
	rec.Holder, rec.Epoch = holder, epoch
	p.mu.Lock()
	fp := p.lastFP
	p.mu.Unlock()
	if err := p.store.SavePlan(ctx, p.leaseName, rec, p.now()); err != nil {
		return err
	}
	p.mu.Lock()
	p.planned = fp
	p.mu.Unlock()
	p.metrics.SetPlanCost(rec.CostUSD)
	return nil
}

// observe sets the plan-cost metric from the stored plan (followers).
func (p *policyPlanner) observe(ctx context.Context) {
	if p.policy == nil {
		return
	}
	if rec, err := p.store.LoadPlan(ctx, store.CurrentPlan); err == nil {
		p.metrics.SetPlanCost(rec.CostUSD)
	}
}

// replanIfWorkloadsChanged re-plans on the leader when workloads were
// created, changed or deleted through the API (on any replica) since its
// last stored plan, so an API workload is planned within one catalog
// reload interval instead of waiting for the re-plan schedule.
func (p *policyPlanner) replanIfWorkloadsChanged(ctx context.Context) error {
	if p.policy == nil {
		return nil
	}
	if _, _, ok := p.leading(); !ok {
		return nil
	}
	recs, err := p.store.ListWorkloads(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	same := p.planned == fingerprint(recs)
	p.mu.Unlock()
	if same {
		return nil
	}
	return p.replan(ctx)
}

func (p *policyPlanner) speedCtx(ctx context.Context) context.Context {
	if p.speeds == nil {
		return ctx
	}
	return withSpeeds(ctx, p.speeds(ctx))
}
