package fleetsim

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/internal/shareddata"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers/fake"
)

// sharedTraces is a folder of ../shared/data/spot-traces; it skips the test
// when the data set is absent, and fails under CI.
func sharedTraces(t testing.TB, folder string) string {
	t.Helper()
	return shareddata.Dir(t, append([]string{"spot-traces"}, strings.Split(folder, "/")...)...)
}

func p3(zone string, spot float64) pricing.Offer {
	return pricing.Offer{Cloud: pricing.AWS, Region: zone[:len(zone)-1], Zone: zone, InstanceType: "p3.2xlarge", GPU: pricing.V100,
		GPUCount: 1, GPUMemoryGiB: 16, VCPUs: 8, MemoryGiB: 61, OnDemandPrice: 3.06, SpotPrice: spot,
		Spot: pricing.SpotSignal{InterruptionsPerHour: 0.05}, ObservedAt: DefaultStart, Source: "test"}
}

func testCatalog() *pricing.Catalog {
	return pricing.NewCatalog([]pricing.Offer{p3("us-east-1a", 0.97), p3("us-east-1c", 0.99), p3("us-east-1d", 1.01)}, DefaultStart, "test")
}

func mustPolicy(t testing.TB, src string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const smokePolicy = `
clouds: [aws]
workloads:
  - name: train
    kind: training
    gpu: {models: [V100], count: 1}
    work: {gpu_hours: 24, reference_gpu: V100}
    deadline: 72h
    checkpoint_interval: 10m
    restart_overhead: 5m
    spot: prefer
  - name: serve
    kind: inference
    gpu: {models: [V100], count: 1}
    replicas: {min: 2, max: 4}
    spot: prefer
`

func runSmoke(t *testing.T, seed uint64) (*Report, *Sim) {
	t.Helper()
	traces, err := LoadTraceDir(sharedTraces(t, "availability/1-node/aws-02-15-2023"))
	if err != nil {
		t.Fatal(err)
	}
	return runSim(t, Config{Policy: mustPolicy(t, smokePolicy), Catalog: testCatalog(), Traces: traces, Seed: seed, Duration: 5 * 24 * time.Hour})
}

// runSim runs one simulation to its end.
func runSim(t *testing.T, cfg Config) (*Report, *Sim) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep, s
}

func TestRunFinishesJobsAndKeepsServices(t *testing.T) {
	rep, sm := runSmoke(t, 1)
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	train, serve := rep.Workloads[0], rep.Workloads[1]
	switch {
	case !train.Finished || train.Missed || train.FinishHours < 24 || train.FinishHours > 72:
		t.Errorf("training job: %+v", train)
	case train.CostUSD <= 0 || train.CostUSD > train.OnDemandUSD*1.5:
		t.Errorf("training job cost: %+v", train)
	case serve.TimeAtTarget < 0.9 || serve.InstanceHours < 2*24*5*0.9:
		t.Errorf("service: %+v", serve)
	case rep.Total.Passes == 0 || rep.Total.APICalls < rep.Total.Launches:
		t.Errorf("totals: %+v", rep.Total)
	case len(rep.Pools) == 0 || rep.Pools[0].Trace == "":
		t.Errorf("no pool drew a trace: %+v", rep.Pools)
	}
	if done, _, ok := sm.JobProgress("train"); !ok || done != 1 {
		t.Errorf("the finished job reports progress %v (ok %v), want 1", done, ok)
	}
	if _, _, ok := sm.JobProgress("serve"); ok {
		t.Error("a service reports job progress")
	}
	if t.Failed() {
		t.Log("\n" + b.String())
	}
}

func TestRunIsDeterministic(t *testing.T) {
	a, _ := runSmoke(t, 3)
	b, _ := runSmoke(t, 3)
	if !reflect.DeepEqual(a.Workloads, b.Workloads) || !reflect.DeepEqual(a.Total, b.Total) || !reflect.DeepEqual(a.Pools, b.Pools) {
		t.Fatalf("two runs with seed 3 differ:\n%+v\n%+v", a, b)
	}
	if !reflect.DeepEqual(a.Series, b.Series) {
		t.Fatalf("two runs with seed 3 differ in their series:\n%+v\n%+v", a.Series, b.Series)
	}
}

func TestTraceIndexNextChange(t *testing.T) {
	tr := &fake.Trace{Name: "t", Gap: time.Minute, Avail: []int{1, 1, 0, 0, 0, 2}}
	ti := newTraceIndex(tr)
	for _, tc := range []struct {
		now    time.Duration
		offset int
		want   time.Duration
	}{
		{0, 0, 2 * time.Minute},
		{90 * time.Second, 0, 2 * time.Minute},
		{2 * time.Minute, 0, 5 * time.Minute},
		{5 * time.Minute, 0, 6 * time.Minute}, // 2 → wraps to 1
		{0, 5, time.Minute},                   // offset 5: tick 0 is the 2
		{6 * time.Minute, 0, 8 * time.Minute}, // second lap
	} {
		got, ok := ti.nextChange(DefaultStart, DefaultStart.Add(tc.now), tc.offset)
		if !ok || got.Sub(DefaultStart) != tc.want {
			t.Errorf("now %s offset %d: next change %s (ok %v), want %s", tc.now, tc.offset, got.Sub(DefaultStart), ok, tc.want)
		}
	}
	if _, ok := newTraceIndex(&fake.Trace{Gap: time.Minute, Avail: []int{3, 3}}).nextChange(DefaultStart, DefaultStart, 0); ok {
		t.Error("a constant trace never changes")
	}
}

// TestPassesFollowEvents: a quiet fleet (one on-demand service, nothing
// failing) costs a pass per tick and a few for its start, whatever the
// traces do in pools it does not use; a shorter tick only adds ticks.
func TestPassesFollowEvents(t *testing.T) {
	const quiet = `
clouds: [aws]
workloads:
  - name: serve
    kind: inference
    gpu: {models: [V100], count: 1}
    replicas: {min: 2, max: 2}
    spot: never
`
	traces := []fake.Trace{{Name: "flappy", Gap: time.Minute, Avail: []int{0, 1, 0, 3, 2}}}
	for _, tc := range []struct {
		tick time.Duration
		max  int
	}{
		{10 * time.Minute, 24*6 + 6},
		{30 * time.Minute, 24*2 + 6},
	} {
		s, err := New(Config{Policy: mustPolicy(t, quiet), Catalog: testCatalog(), Traces: traces, Seed: 1, Duration: 24 * time.Hour, Tick: tc.tick})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := s.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if rep.Total.Passes > tc.max || rep.Total.Passes < int(24*time.Hour/tc.tick) {
			t.Errorf("tick %s: %d passes in a day, want %d to %d", tc.tick, rep.Total.Passes, int(24*time.Hour/tc.tick), tc.max)
		}
		if rep.Workloads[0].TimeAtTarget < 0.99 || rep.Total.Launches != 2 {
			t.Errorf("tick %s: service %+v", tc.tick, rep.Workloads[0])
		}
	}
}

// Spot dearer than on demand (it happens for some types and zones) buys
// nothing: neither the training stage nor hedging may launch it.
func TestSpotDearerThanOnDemandIsNotUsed(t *testing.T) {
	cat := pricing.NewCatalog([]pricing.Offer{p3("us-east-1a", 3.5), p3("us-east-1c", 3.6), p3("us-east-1d", 3.06)}, DefaultStart, "test")
	rep, s := runSim(t, Config{Policy: mustPolicy(t, smokePolicy), Catalog: cat, Seed: 1, Duration: 4 * 24 * time.Hour})
	for _, in := range s.insts {
		if in.pool.Capacity == pricing.Spot {
			t.Errorf("%s launched on spot in %s at $%.2f/h (on demand $%.2f/h)", in.workload, in.pool.Zone, in.price, in.od)
		}
	}
	if w := rep.Workloads[0]; !w.Finished || w.Missed || w.Migrations != 0 {
		t.Errorf("training job: %+v", w)
	}
}

// A spot-only job never runs on demand, even when the deadline safety net
// would want it: with spot gone for good it misses its deadline instead.
func TestSpotOnlyJobNeverRunsOnDemand(t *testing.T) {
	src := `
clouds: [aws]
workloads:
  - name: train
    kind: training
    gpu: {models: [V100], count: 1}
    work: {gpu_hours: 20, reference_gpu: V100}
    deadline: 30h
    checkpoint_interval: 10m
    restart_overhead: 5m
    spot: only
`
	// Spot for the first 4 hours of every 40, nothing after: the safety
	// net gives up on spot long before the deadline.
	scarce := fake.Trace{Name: "scarce", Gap: time.Hour}
	for i := range 40 {
		scarce.Avail = append(scarce.Avail, map[bool]int{true: 1}[i < 4])
	}
	rep, s := runSim(t, Config{Policy: mustPolicy(t, src), Catalog: testCatalog(), Traces: []fake.Trace{scarce}, Seed: 1, Duration: 2 * 24 * time.Hour})
	for _, in := range s.insts {
		if in.pool.Capacity != pricing.Spot {
			t.Errorf("the spot-only job launched on %s in %s at %s", in.pool.Capacity, in.pool.Zone, in.launched.Sub(DefaultStart))
		}
	}
	if w := rep.Workloads[0]; w.Finished || !w.Missed {
		t.Errorf("with spot for 4 h of 30 the 20-hour job cannot finish: %+v", w)
	}
	// The report says the miss was the owner's choice.
	if w := rep.Workloads[0]; !w.SpotOnly || rep.Total.SpotOnlyMisses != 1 || rep.Total.DeadlineMisses != 1 {
		t.Errorf("spot_only %v, totals %d misses (%d spot only), want the one miss marked spot only", w.SpotOnly, rep.Total.DeadlineMisses, rep.Total.SpotOnlyMisses)
	}
	var out strings.Builder
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "true (spot only)") || !strings.Contains(out.String(), "1 (1 spot only)") {
		t.Errorf("the table does not mark the spot-only miss:\n%s", out.String())
	}
}
