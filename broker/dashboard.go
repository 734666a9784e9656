package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gpubroker/gpubroker/dashboard"
	"github.com/gpubroker/gpubroker/fleet"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/store"
)

// The adapters below give the web dashboard read-only views of the store
// and the planner, in the dashboard's own types. Parts the broker does not
// have yet (the autoscaler's fleet instances and slots) are wired as
// dashboard.NoFleet unless a fleet is configured (dashFleetSource).

// dashStore reads the broker's tables for the dashboard.
type dashStore struct {
	st *store.Store
	b  *store.Broker
}

var (
	_ dashboard.PriceHistory = dashStore{}
	_ dashboard.Agents       = dashStore{}
	_ dashboard.Benchmarks   = dashStore{}
	_ dashboard.Events       = dashStore{}
)

func (d dashStore) PriceHistory(ctx context.Context, key string, since time.Time) ([]dashboard.PricePoint, error) {
	pts, err := d.st.PriceHistory(ctx, key, since)
	if err != nil {
		return nil, err
	}
	out := make([]dashboard.PricePoint, len(pts))
	for i, p := range pts {
		out[i] = dashboard.PricePoint{Capacity: p.Capacity, Price: p.Price, At: p.ObservedAt}
	}
	return out, nil
}

func (d dashStore) Agents(ctx context.Context, workload string, offset, limit int) ([]dashboard.Agent, int, error) {
	recs, total, err := d.b.PageInstances(ctx, workload, offset, limit)
	if err != nil {
		return nil, 0, err
	}
	out := make([]dashboard.Agent, len(recs))
	for i, r := range recs {
		out[i] = dashboard.Agent{ID: r.ID, Hostname: r.Hostname, AgentVersion: r.AgentVersion, Cloud: r.Cloud,
			Region: r.Region, Zone: r.Zone, InstanceType: r.InstanceType, GPU: r.GPU, GPUCount: r.GPUCount,
			Capacity: r.Capacity, Workload: r.Workload, State: r.State, DrainState: r.DrainState,
			RegisteredAt: r.RegisteredAt, LastHeartbeat: r.LastHeartbeat, Load1: r.Load1, Utilization: r.Utilization,
			Telemetry: r.Telemetry}
	}
	return out, int(total), nil
}

func (d dashStore) ActiveGPUs(ctx context.Context, since time.Time) ([]dashboard.GPUCount, error) {
	cs, err := d.b.ActiveGPUs(ctx, since)
	if err != nil {
		return nil, err
	}
	out := make([]dashboard.GPUCount, len(cs))
	for i, c := range cs {
		out[i] = dashboard.GPUCount{Cloud: c.Cloud, Capacity: c.Capacity, Instances: c.Instances, GPUs: c.GPUs}
	}
	return out, nil
}

func (d dashStore) Benchmarks(ctx context.Context) ([]dashboard.Benchmark, error) {
	bs, err := d.b.ListBenchmarks(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]dashboard.Benchmark, len(bs))
	for i, b := range bs {
		out[i] = dashboard.Benchmark{Instance: b.Instance, InstanceType: b.InstanceType, GPU: b.GPU, TFLOPS: b.TFLOPS,
			MemBandwidthGB: b.MemBandwidthGB, At: b.At}
	}
	return out, nil
}

func (d dashStore) RecentEvents(ctx context.Context, q dashboard.EventQuery) ([]dashboard.Event, error) {
	evs, err := d.b.RecentEvents(ctx, store.EventFilter{Kind: q.Kind, Instance: q.Instance, Workload: q.Workload,
		Since: q.Since, Limit: q.Limit}, q.BeforeID)
	if err != nil {
		return nil, err
	}
	out := make([]dashboard.Event, len(evs))
	for i, e := range evs {
		out[i] = dashboard.Event{ID: e.ID, At: e.At, Kind: e.Kind, Instance: e.Instance, Workload: e.Workload, Message: e.Message}
	}
	return out, nil
}

func (d dashStore) EventKinds(ctx context.Context) ([]string, error) { return d.b.EventKinds(ctx) }

// dashPlan reads the stored plan of the loaded policy and its budgets.
type dashPlan struct{ p *policyPlanner }

var (
	_ dashboard.CurrentPlan = dashPlan{}
	_ dashboard.Budgets     = dashPlan{}
)

func (d dashPlan) record(ctx context.Context) (store.PlanRecord, error) {
	r, err := d.p.current(ctx)
	if errors.Is(err, policy.ErrNoPolicy) {
		return store.PlanRecord{}, dashboard.ErrNoSource
	}
	return r, err
}

// CurrentPlan decodes the stored plan as the optimizer's plan: apiv1.Plan
// has the same JSON shape (TestAPIPlanMatchesOptimizer), and the dashboard
// shows plans it computes itself ("plan this policy") the same way.
func (d dashPlan) CurrentPlan(ctx context.Context) (*optimizer.Plan, error) {
	r, err := d.record(ctx)
	if err != nil {
		return nil, err
	}
	var plan optimizer.Plan
	if err := json.Unmarshal(r.Plan, &plan); err != nil {
		return nil, fmt.Errorf("decoding the stored plan: %w", err)
	}
	return &plan, nil
}

func (d dashPlan) Budgets(ctx context.Context) ([]dashboard.Budget, error) {
	view, err := d.p.Budgets(ctx)
	if errors.Is(err, policy.ErrNoPolicy) {
		return nil, dashboard.ErrNoSource
	}
	if err != nil {
		return nil, err
	}
	out := make([]dashboard.Budget, len(view.Budgets))
	for i, b := range view.Budgets {
		out[i] = dashboard.Budget{Name: b.Name, Team: b.Team, Workload: b.Workload, MonthlyUSD: b.MonthlyUSD,
			PlannedUSD: b.PlannedUSD, Workloads: b.Workloads, SpentUSD: b.SpentUSD, BurnPerHourUSD: b.BurnPerHourUSD,
			ForecastUSD: b.ForecastUSD}
	}
	return out, nil
}

// dashSpend sums the spend ledger (fleet/ledger, written by the leader's
// ledger job) for the dashboard.
type dashSpend struct{ b *store.Broker }

var _ dashboard.Spend = dashSpend{}

func (d dashSpend) Spend(ctx context.Context, now time.Time) (dashboard.SpendSummary, error) {
	now = now.UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	today := now.Truncate(24 * time.Hour)
	rows, err := d.b.ListSpend(ctx, month, today.Add(24*time.Hour))
	if err != nil {
		return dashboard.SpendSummary{}, err
	}
	if len(rows) == 0 {
		return dashboard.SpendSummary{}, dashboard.ErrNoSource
	}
	var out dashboard.SpendSummary
	for _, r := range rows {
		out.MonthUSD += r.Cost
		out.OnDemandMonthUSD += r.OnDemand
		if r.Day.Equal(today) {
			out.TodayUSD += r.Cost
		}
		if n := len(out.Daily); n == 0 || !out.Daily[n-1].Day.Equal(r.Day) {
			out.Daily = append(out.Daily, dashboard.DaySpend{Day: r.Day})
		}
		out.Daily[len(out.Daily)-1].USD += r.Cost
		out.Daily[len(out.Daily)-1].OnDemand += r.OnDemand
	}
	return out, nil
}

// dashFleet shows the fleet reconciler's slots and instances on the
// dashboard's Fleet page.
type dashFleet struct{ svc *fleet.Service }

var _ dashboard.FleetInstances = dashFleet{}

func (d dashFleet) FleetInstances(ctx context.Context, q dashboard.FleetQuery) (dashboard.FleetPage, error) {
	st, err := d.svc.Status(ctx)
	if err != nil {
		return dashboard.FleetPage{}, err
	}
	if len(st.Slots) == 0 && len(st.Orphans) == 0 {
		return dashboard.FleetPage{}, dashboard.ErrNoSource
	}
	var page dashboard.FleetPage
	sums := map[string]*dashboard.SlotSummary{}
	var order []string
	var all []dashboard.FleetInstance
	for _, s := range st.Slots {
		sum := sums[s.Workload]
		if sum == nil {
			sum = &dashboard.SlotSummary{Workload: s.Workload}
			sums[s.Workload] = sum
			order = append(order, s.Workload)
		}
		if s.State != string(fleet.Gone) {
			sum.Desired++
		}
		if s.State == string(fleet.Running) {
			sum.Running++
		}
		if s.InstanceID == "" || (q.Workload != "" && s.Workload != q.Workload) {
			continue
		}
		all = append(all, dashboard.FleetInstance{ID: s.InstanceID, Workload: s.Workload, Slot: s.ID, Cloud: s.Cloud,
			Region: s.Region, Zone: s.Zone, InstanceType: s.InstanceType, GPU: s.GPU, Capacity: s.Capacity,
			State: s.State, LaunchedAt: s.LaunchedAt, PricePerHour: s.PricePerHour})
	}
	for _, w := range order {
		page.Slots = append(page.Slots, *sums[w])
	}
	page.Total = len(all)
	lo := min(max(q.Offset, 0), len(all))
	hi := len(all)
	if q.Limit > 0 {
		hi = min(lo+q.Limit, len(all))
	}
	page.Instances = all[lo:hi]
	return page, nil
}
