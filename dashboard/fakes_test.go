package dashboard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/pricing"
)

// fakeAuth accepts the admin tokens it holds (token → name).
type fakeAuth map[string]string

func (f fakeAuth) VerifyAdmin(_ context.Context, tok string) (string, error) {
	if name, ok := f[tok]; ok {
		return name, nil
	}
	return "", errors.New("invalid token")
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakeData implements every source from plain slices.
type fakeData struct {
	catalog *pricing.Catalog
	history map[string][]PricePoint
	plan    *optimizer.Plan
	planErr error
	budgets []Budget
	agents  []Agent
	bench   []Benchmark
	events  []Event // oldest first, ids ascending
	fleet   *FleetPage
	spend   *SpendSummary
}

func (f *fakeData) Catalog() *pricing.Catalog { return f.catalog }

func (f *fakeData) PriceHistory(_ context.Context, key string, since time.Time) ([]PricePoint, error) {
	var out []PricePoint
	for _, p := range f.history[key] {
		if !p.At.Before(since) {
			out = append(out, p)
		}
	}
	return out, nil
}

func (f *fakeData) CurrentPlan(context.Context) (*optimizer.Plan, error) {
	if f.planErr != nil {
		return nil, f.planErr
	}
	if f.plan == nil {
		return nil, ErrNoSource
	}
	return f.plan, nil
}

func (f *fakeData) Budgets(context.Context) ([]Budget, error) {
	if f.planErr != nil {
		return nil, f.planErr
	}
	if f.plan == nil {
		return nil, ErrNoSource
	}
	return f.budgets, nil
}

func (f *fakeData) Agents(_ context.Context, workload string, offset, limit int) ([]Agent, int, error) {
	var match []Agent
	for _, a := range f.agents {
		if workload == "" || a.Workload == workload {
			match = append(match, a)
		}
	}
	lo, hi := min(offset, len(match)), min(offset+limit, len(match))
	return match[lo:hi], len(match), nil
}

func (f *fakeData) ActiveGPUs(_ context.Context, since time.Time) ([]GPUCount, error) {
	idx := map[[2]string]*GPUCount{}
	var out []GPUCount
	var keys [][2]string
	for _, a := range f.agents {
		if a.LastHeartbeat.Before(since) {
			continue
		}
		k := [2]string{a.Cloud, a.Capacity}
		if idx[k] == nil {
			idx[k] = &GPUCount{Cloud: a.Cloud, Capacity: a.Capacity}
			keys = append(keys, k)
		}
		idx[k].Instances++
		idx[k].GPUs += int64(a.GPUCount)
	}
	for _, k := range keys {
		out = append(out, *idx[k])
	}
	return out, nil
}

func (f *fakeData) Benchmarks(context.Context) ([]Benchmark, error) { return f.bench, nil }

func (f *fakeData) RecentEvents(_ context.Context, q EventQuery) ([]Event, error) {
	var out []Event
	for i := len(f.events) - 1; i >= 0 && len(out) < q.Limit; i-- {
		e := f.events[i]
		if (q.Kind != "" && e.Kind != q.Kind) || (q.Workload != "" && e.Workload != q.Workload) ||
			(q.Instance != "" && e.Instance != q.Instance) || (!q.Since.IsZero() && e.At.Before(q.Since)) ||
			(q.BeforeID > 0 && e.ID >= q.BeforeID) {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

func (f *fakeData) EventKinds(context.Context) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, e := range f.events {
		if !seen[e.Kind] {
			seen[e.Kind] = true
			out = append(out, e.Kind)
		}
	}
	return out, nil
}

func (f *fakeData) FleetInstances(_ context.Context, q FleetQuery) (FleetPage, error) {
	if f.fleet == nil {
		return FleetPage{}, ErrNoSource
	}
	p := *f.fleet
	lo, hi := min(q.Offset, len(p.Instances)), min(q.Offset+q.Limit, len(p.Instances))
	p.Total = len(p.Instances)
	p.Instances = p.Instances[lo:hi]
	return p, nil
}

func (f *fakeData) Spend(context.Context, time.Time) (SpendSummary, error) {
	if f.spend == nil {
		return SpendSummary{}, ErrNoSource
	}
	return *f.spend, nil
}

const (
	testToken = "gpb_test-admin-token"
	xssScript = `<script>alert(1)</script>`
	xssImg    = `"><img src=x onerror=alert(1)>`
)

var testNow = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// hostileData is a broker state whose every outside name is hostile.
func hostileData(agents, events int) *fakeData {
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		panic(err)
	}
	f := &fakeData{catalog: cat, history: map[string][]PricePoint{}}
	for i := range agents {
		name, gpu := fmt.Sprintf("inst-%05d", i), "H100"
		wl := fmt.Sprintf("workload-%d", i%50)
		if i == 0 {
			name, gpu, wl = xssImg, xssImg, xssScript
		}
		f.agents = append(f.agents, Agent{ID: name, Hostname: xssScript, Cloud: "aws", Region: "us-east-1", Zone: xssScript,
			InstanceType: xssImg, GPU: gpu, GPUCount: 8, Capacity: "spot", Workload: wl, State: "running",
			RegisteredAt: testNow.Add(-time.Hour), LastHeartbeat: testNow.Add(-10 * time.Second), Utilization: 90,
			Telemetry: []byte(`[{"index":0,"name":"` + strings.ReplaceAll(xssImg, `"`, `\"`) + `","util_gpu_pct":93}]`)})
	}
	for i := range events {
		f.events = append(f.events, Event{ID: int64(i + 1), At: testNow.Add(-time.Duration(events-i) * time.Second),
			Kind: []string{"notice", "drained", "launched", "price_change"}[i%4], Instance: xssImg, Workload: xssScript,
			Message: xssScript + " " + xssImg})
	}
	f.bench = []Benchmark{{Instance: xssImg, InstanceType: xssImg, GPU: xssScript, TFLOPS: 1, MemBandwidthGB: 1, At: testNow},
		{Instance: "a", InstanceType: "p5.48xlarge", GPU: "H100", TFLOPS: 742, MemBandwidthGB: 2890, At: testNow}}
	f.fleet = &FleetPage{Slots: []SlotSummary{{Workload: xssScript, Desired: 2, Running: 1}}}
	for i := range agents {
		f.fleet.Instances = append(f.fleet.Instances, FleetInstance{ID: fmt.Sprintf("i-%05d", i), Workload: xssScript, Slot: xssImg,
			Cloud: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: xssImg, GPU: xssImg, GPUs: 8, Capacity: "spot",
			State: "running", LaunchedAt: testNow.Add(-time.Hour), PricePerHour: 30.5})
	}
	f.plan = &optimizer.Plan{GeneratedAt: testNow, Policy: xssImg, HorizonHours: 720,
		Placements: []optimizer.Placement{{Workload: xssScript, Team: xssImg, Kind: "training", Cloud: "aws", Region: "us-east-1",
			Zone: xssImg, InstanceType: xssImg, GPU: pricing.GPUModel(xssImg), Capacity: pricing.Spot, GPUs: 8, Instances: 1,
			ExpectedHours: 40, ExpectedCost: 800, OnDemandBaseline: 2000, Savings: 1200,
			RunnerUp: &optimizer.RunnerUp{Cloud: "gcp", Region: xssScript, InstanceType: xssImg, Constraint: "cost", Reason: xssImg}}},
		Totals:   optimizer.Totals{ExpectedCost: 800, OnDemandBaseline: 2000, Savings: 1200, SavingsPercent: 60, GPUs: 8},
		Warnings: []string{xssScript}}
	f.budgets = []Budget{{Name: xssScript, Team: xssImg, MonthlyUSD: 1000, PlannedUSD: 800, Workloads: []string{xssScript}}}
	f.history["aws/us-east-1/use1-az1/p5.48xlarge"] = []PricePoint{
		{Capacity: pricing.Spot, Price: 30, At: testNow.Add(-48 * time.Hour)},
		{Capacity: pricing.Spot, Price: 28, At: testNow.Add(-24 * time.Hour)},
		{Capacity: pricing.OnDemand, Price: 98.32, At: testNow.Add(-48 * time.Hour)},
	}
	return f
}

// newTestServer wires a Server to f with a settable clock.
func newTestServer(f *fakeData, clock *fakeClock, secure bool) *Server {
	s, err := New(Config{Auth: fakeAuth{testToken: "ops"}, Offers: f, History: f, Plan: f, Agents: f, Benchmarks: f,
		Events: f, Budgets: f, Fleet: f, Spend: f, Now: clock.Now, Secure: secure})
	if err != nil {
		panic(err)
	}
	return s
}
