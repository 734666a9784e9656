package fleet

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/providers/fake"
	"github.com/gpubroker/gpubroker/store"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

const lease = "broker-leader"

// env is one broker's fleet against a fake AWS, on a real SQLite store,
// with agents simulated through the store's real registration and report
// calls (what the broker's handlers call).
type env struct {
	t      testing.TB
	clk    *clock
	st     *store.Store
	broker *store.Broker
	fleet  *store.Fleet
	cloud  *fake.Compute
	r      *Reconciler
	holder string
	epoch  int64
	minted map[string]string
	mu     sync.Mutex
	// deadAgents are instances whose agent never registers or stops.
	deadAgents map[string]bool
}

func p3(zone string, spot float64) pricing.Offer {
	return pricing.Offer{Cloud: pricing.AWS, Region: zone[:len(zone)-1], Zone: zone, InstanceType: "p3.2xlarge", GPU: pricing.V100,
		GPUCount: 1, GPUMemoryGiB: 16, VCPUs: 8, MemoryGiB: 61, OnDemandPrice: 3.06, SpotPrice: spot,
		Spot: pricing.SpotSignal{InterruptionsPerHour: 0.01}, ObservedAt: t0, Source: "test"}
}

// testOffers: us-east-1a is cheapest, then 1b, then 1c.
func testOffers() []pricing.Offer {
	return []pricing.Offer{p3("us-east-1a", 0.90), p3("us-east-1b", 0.95), p3("us-east-1c", 1.00)}
}

const testPolicy = `
clouds: [aws]
workloads:
  - name: train
    kind: training
    gpu: {models: [V100], count: 2}
    work: {gpu_hours: 20, reference_gpu: V100}
    checkpoint_interval: 30m
    restart_overhead: 5m
    spot: only
`

type tokenMinter struct{ e *env }

func (m tokenMinter) Mint(_ context.Context, r MintRequest) (string, error) {
	m.e.mu.Lock()
	defer m.e.mu.Unlock()
	if tok, ok := m.e.minted[r.ClientToken]; ok {
		return tok, nil
	}
	tok := fmt.Sprintf("gpbb_%d", len(m.e.minted)+1)
	m.e.minted[r.ClientToken] = tok
	return tok, nil
}

type envOpt func(*fake.ComputeConfig, *Options)

func newEnv(t testing.TB, pol string, opts ...envOpt) *env {
	t.Helper()
	return newEnvDSN(t, filepath.Join(t.TempDir(), "fleet.db"), pol, opts...)
}

// openStore opens the store at dsn (SQLite path or PostgreSQL), closed
// when t ends, with its broker and fleet views.
func openStore(t testing.TB, dsn string) (*store.Store, *store.Broker, *store.Fleet) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b, err := st.Broker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := b.Fleet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st, b, f
}

// newEnvDSN is newEnv on the store at dsn (SQLite path or PostgreSQL).
func newEnvDSN(t testing.TB, dsn, pol string, opts ...envOpt) *env {
	t.Helper()
	st, b, f := openStore(t, dsn)
	clk := &clock{t: t0}
	e := &env{t: t, clk: clk, st: st, broker: b, fleet: f, minted: map[string]string{}, deadAgents: map[string]bool{}}
	cc := fake.ComputeConfig{Cloud: pricing.AWS, Offers: testOffers(), Now: clk.Now, SpotScale: 10, LaunchLatency: 30 * time.Second}
	o := Options{Mode: Apply, BrokerURL: "https://broker.test"}
	for _, fn := range opts {
		fn(&cc, &o)
	}
	e.cloud = fake.NewCompute(cc)
	e.cloud.OnNotice(e.agentNotice)
	p, err := policy.Parse("test.yaml", []byte(pol))
	if err != nil {
		t.Fatal(err)
	}
	cat := pricing.NewCatalog(cc.Offers, t0, "test")
	un := &Unavailable{}
	e.r = &Reconciler{Store: f, Computes: map[pricing.Cloud]providers.Compute{pricing.AWS: e.cloud}, Agents: b,
		Plans:  &SolverSource{Catalog: func() *pricing.Catalog { return cat }, Policy: func() *policy.Policy { return p }, Now: clk.Now},
		Tokens: tokenMinter{e}, Unavailable: un, Now: clk.Now, Options: o}
	e.lead("a")
	return e
}

// lead makes holder take the lease (after the current one expires).
func (e *env) lead(holder string) {
	e.t.Helper()
	l, ok, err := e.broker.AcquireLease(context.Background(), lease, holder, time.Hour, e.clk.Now())
	if err != nil || !ok {
		e.t.Fatalf("lease for %s: ok=%v err=%v", holder, ok, err)
	}
	e.holder, e.epoch = holder, l.Epoch
}

func (e *env) fence() store.Fence {
	return store.Fence{Lease: lease, Holder: e.holder, Epoch: e.epoch, Now: e.clk.Now()}
}

// pass runs one reconcile pass and fails the test on error.
func (e *env) pass() Report {
	e.t.Helper()
	e.lead(e.holder) // renew (same epoch)
	rep, err := e.r.Reconcile(context.Background(), e.fence())
	if err != nil {
		e.t.Fatalf("reconcile: %v", err)
	}
	return rep
}

// agentNotice is what the agent does on a notice: report it to the broker.
func (e *env) agentNotice(n fake.Notice) {
	_, _, err := e.broker.RecordReport(context.Background(), store.Report{
		Event: store.EventRecord{At: e.clk.Now(), Kind: "notice", Instance: n.Instance.ID, Message: "spot interruption",
			IdempotencyKey: "notice-" + n.Instance.ID},
		State: store.StatePreempting, PreemptAt: n.At})
	if err != nil && !strings.Contains(err.Error(), "not found") {
		e.t.Errorf("recording notice: %v", err)
	}
}

// agentsUp registers (once) and heartbeats the agent of every running
// instance, as real agents do.
func (e *env) agentsUp() {
	e.t.Helper()
	ctx := context.Background()
	var beats []store.HeartbeatUpdate
	for _, in := range e.cloud.Instances() {
		if in.State != providers.StateRunning || e.deadAgents[in.ID] || in.Tags[TagFleet] == "" {
			continue
		}
		if _, err := e.broker.GetInstance(ctx, in.ID); err != nil {
			_, err := e.broker.RegisterAgent(ctx, store.InstanceRecord{ID: in.ID, Cloud: string(in.Cloud), Region: in.Region, Zone: in.Zone,
				InstanceType: in.InstanceType, Capacity: string(in.Capacity), Workload: in.Tags[TagWorkload]}, "hash-"+in.ID, e.clk.Now())
			if err != nil {
				e.t.Fatal(err)
			}
		}
		beats = append(beats, store.HeartbeatUpdate{Instance: in.ID, At: e.clk.Now()})
	}
	if len(beats) > 0 {
		if _, err := e.broker.Heartbeats(ctx, beats); err != nil {
			e.t.Fatal(err)
		}
	}
}

// step moves the clock, lets agents report, and runs a pass.
func (e *env) step(d time.Duration) Report {
	e.clk.Add(d)
	e.cloud.Sync()
	e.agentsUp()
	return e.pass()
}

func (e *env) slots() map[string]store.SlotRecord {
	e.t.Helper()
	st, err := e.fleet.Load(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]store.SlotRecord{}
	for _, s := range st.Slots {
		out[s.ID] = s
	}
	return out
}

// checkNoDuplicates is the fleet's safety property: at most one live
// instance per slot that is not on its way out (preempted or terminated
// by the fleet), and at most one instance per launch token.
func (e *env) checkNoDuplicates() {
	e.t.Helper()
	perSlot := map[string][]string{}
	perToken := map[string]int{}
	st, _ := e.fleet.Load(context.Background())
	retired := map[string]bool{}
	for _, r := range st.Instances {
		if r.Retired {
			retired[r.ID] = true
		}
	}
	for _, in := range e.cloud.Instances() {
		if in.Tags[TagFleet] == "" {
			continue
		}
		perToken[in.Tags[TagToken]]++
		if in.State == providers.StateTerminated || e.cloud.Noticed(in.ID) || retired[in.ID] {
			continue
		}
		perSlot[in.Tags[TagSlot]] = append(perSlot[in.Tags[TagSlot]], in.ID)
	}
	for s, ids := range perSlot {
		if len(ids) > 1 {
			e.t.Fatalf("slot %s has %d live instances %v:\n%s", s, len(ids), ids, e.cloud.Describe())
		}
	}
	for tok, n := range perToken {
		if n > 1 {
			e.t.Fatalf("launch token %s started %d instances", tok, n)
		}
	}
}

func (e *env) events(kind string) []store.EventRecord {
	e.t.Helper()
	var out []store.EventRecord
	var after int64
	for {
		evs, err := e.broker.ListEvents(context.Background(), store.EventFilter{Kind: kind, AfterID: after, Limit: 1000})
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, evs...)
		if len(evs) < 1000 {
			return out
		}
		after = evs[len(evs)-1].ID
	}
}

func liveTagged(c *fake.Compute) []providers.Instance {
	var out []providers.Instance
	for _, in := range c.Instances() {
		if in.Tags[TagFleet] != "" && in.State != providers.StateTerminated {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func planOf(t testing.TB, pol string) *optimizer.Plan {
	p, err := policy.Parse("test.yaml", []byte(pol))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := optimizer.Solve(optimizer.Input{Catalog: pricing.NewCatalog(testOffers(), t0, "test"), Policy: p, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

type planT = optimizer.Plan

// staticPlan is a PlanSource with a fixed plan (nil: nothing desired).
type staticPlan struct{ plan *optimizer.Plan }

func (s staticPlan) Plan(context.Context, *Unavailable) (*optimizer.Plan, error) {
	if s.plan == nil {
		return &optimizer.Plan{}, nil
	}
	return s.plan, nil
}
