package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/pricing"
)

// The dashboard reads everything through the small interfaces below; the
// broker implements them with adapters over the store, the catalog holder
// and the planner (broker/dashboard.go). A part of the system that has not
// been built yet is wired as one of the No* values, and its page shows an
// empty state instead of numbers.

// ErrNoSource is returned by a source whose data is not recorded yet (no
// policy loaded, no fleet state, no spend ledger). Pages show an empty
// state for it, never zeros.
var ErrNoSource = errors.New("not recorded yet")

// Offers gives the price catalog the broker plans with.
type Offers interface {
	// Catalog returns the current catalog; never nil.
	Catalog() *pricing.Catalog
}

// OffersFunc adapts a function (such as a catalog holder's Load) to Offers.
type OffersFunc func() *pricing.Catalog

// Catalog calls f.
func (f OffersFunc) Catalog() *pricing.Catalog { return f() }

// PricePoint is one recorded price of one offer and capacity type.
type PricePoint struct {
	Capacity pricing.CapacityType
	Price    float64
	At       time.Time
}

// PriceHistory reads the recorded prices of one offer.
type PriceHistory interface {
	// PriceHistory returns the points of the offer with this key
	// (Offer.Key) since a time, oldest first; none is not an error.
	PriceHistory(ctx context.Context, key string, since time.Time) ([]PricePoint, error)
}

// CurrentPlan reads the plan of the policy the broker keeps placed.
type CurrentPlan interface {
	// CurrentPlan returns the latest plan. ErrNoSource when no policy is
	// loaded; an error wrapping *optimizer.InfeasibleError when some
	// workload is blocked.
	CurrentPlan(ctx context.Context) (*optimizer.Plan, error)
}

// PolicyPlanner plans a policy file that a user pastes or uploads.
type PolicyPlanner interface {
	// PlanPolicy parses data (name is used in error positions) and plans it.
	// Errors in the file come back as policy.ErrorList; blocked workloads as
	// *optimizer.InfeasibleError.
	PlanPolicy(ctx context.Context, name string, data []byte) (*optimizer.Plan, error)
}

// Agent is one instance whose in-VM agent registered with the broker.
type Agent struct {
	ID, Hostname, AgentVersion            string
	Cloud, Region, Zone, InstanceType     string
	GPU                                   string
	GPUCount                              int
	Capacity, Workload, State, DrainState string
	RegisteredAt, LastHeartbeat           time.Time
	Load1, Utilization                    float64
	// Telemetry is the agent's per-GPU telemetry as sent (a JSON array).
	Telemetry json.RawMessage
}

// GPUCount is how many instances and GPUs of one cloud and capacity type
// are active.
type GPUCount struct {
	Cloud     string
	Capacity  string
	Instances int64
	GPUs      int64
}

// Agents reads the registered agents.
type Agents interface {
	// Agents returns one page of agents ordered by workload then id, and
	// how many match in all.
	Agents(ctx context.Context, workload string, offset, limit int) ([]Agent, int, error)
	// ActiveGPUs counts active, undrained agents' GPUs by cloud and
	// capacity type (heartbeat since activeSince).
	ActiveGPUs(ctx context.Context, activeSince time.Time) ([]GPUCount, error)
}

// Benchmark is one measured result of an agent's GPU benchmark.
type Benchmark struct {
	Instance, InstanceType, GPU string
	TFLOPS, MemBandwidthGB      float64
	At                          time.Time
}

// Benchmarks reads the recorded benchmark results.
type Benchmarks interface {
	// Benchmarks returns every recorded result, oldest first.
	Benchmarks(ctx context.Context) ([]Benchmark, error)
}

// Event is one entry of the broker's timeline.
type Event struct {
	ID                                int64
	At                                time.Time
	Kind, Instance, Workload, Message string
}

// EventQuery filters the timeline; zero fields do not filter.
type EventQuery struct {
	Kind, Workload, Instance string
	Since                    time.Time
	// BeforeID pages backwards: only events with a smaller id.
	BeforeID int64
	Limit    int
}

// Events reads the timeline.
type Events interface {
	// RecentEvents returns matching events, newest first, at most q.Limit.
	RecentEvents(ctx context.Context, q EventQuery) ([]Event, error)
	// EventKinds lists the kinds recorded so far.
	EventKinds(ctx context.Context) ([]string, error)
}

// Budget is one policy budget with what the current plan expects to spend
// under it.
type Budget struct {
	Name, Team, Workload string
	MonthlyUSD           float64
	// PlannedUSD is the expected cost of the covered placements (jobs: the
	// whole run; inference: the plan's horizon).
	PlannedUSD float64
	Workloads  []string
	// SpentUSD is this month's spend under the budget from the spend
	// ledger, BurnPerHourUSD the hourly price of what runs now, and
	// ForecastUSD spent + burn × hours left in the month (zero without a
	// ledger).
	SpentUSD, BurnPerHourUSD, ForecastUSD float64
}

// Budgets reads the loaded policy's budgets.
type Budgets interface {
	// Budgets returns the budgets; ErrNoSource when no policy is loaded.
	Budgets(ctx context.Context) ([]Budget, error)
}

// FleetInstance is one instance the autoscaler launched for a slot.
type FleetInstance struct {
	ID, Workload, Slot                string
	Cloud, Region, Zone, InstanceType string
	GPU                               string
	GPUs                              int
	Capacity, State                   string
	LaunchedAt                        time.Time
	PricePerHour                      float64
}

// SlotSummary is one workload's desired and running slot counts.
type SlotSummary struct {
	Workload         string
	Desired, Running int
}

// FleetQuery selects one page of fleet instances.
type FleetQuery struct {
	Workload      string
	Offset, Limit int
}

// FleetPage is one page of the fleet state.
type FleetPage struct {
	Instances []FleetInstance
	Total     int
	Slots     []SlotSummary
}

// FleetInstances reads the autoscaler's fleet state.
type FleetInstances interface {
	// FleetInstances returns one page; ErrNoSource until the autoscaler
	// records instances.
	FleetInstances(ctx context.Context, q FleetQuery) (FleetPage, error)
}

// DaySpend is what was spent on one UTC day.
type DaySpend struct {
	Day      time.Time
	USD      float64
	OnDemand float64 // what the same hours would have cost on demand
}

// SpendSummary is the spend ledger's answer for the month of now.
type SpendSummary struct {
	TodayUSD, MonthUSD float64
	// OnDemandMonthUSD is what this month's hours would have cost all on
	// demand.
	OnDemandMonthUSD float64
	Daily            []DaySpend
}

// Spend reads the spend ledger.
type Spend interface {
	// Spend sums spending for the UTC day and month of now; ErrNoSource
	// until a ledger records spending.
	Spend(ctx context.Context, now time.Time) (SpendSummary, error)
}

// NoFleet is the FleetInstances of a broker whose autoscaler has not
// recorded any state.
type NoFleet struct{}

// FleetInstances returns ErrNoSource.
func (NoFleet) FleetInstances(context.Context, FleetQuery) (FleetPage, error) {
	return FleetPage{}, ErrNoSource
}

// NoSpend is the Spend of a broker without a spend ledger.
type NoSpend struct{}

// Spend returns ErrNoSource.
func (NoSpend) Spend(context.Context, time.Time) (SpendSummary, error) {
	return SpendSummary{}, ErrNoSource
}

// NoPlan is the CurrentPlan and Budgets of a broker without a planner.
type NoPlan struct{}

// CurrentPlan returns ErrNoSource.
func (NoPlan) CurrentPlan(context.Context) (*optimizer.Plan, error) { return nil, ErrNoSource }

// Budgets returns ErrNoSource.
func (NoPlan) Budgets(context.Context) ([]Budget, error) { return nil, ErrNoSource }

// SavedUSD is this month's savings against all on-demand.
func (s SpendSummary) SavedUSD() float64 { return s.OnDemandMonthUSD - s.MonthUSD }
