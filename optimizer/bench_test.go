package optimizer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/internal/cputime"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// benchFleet is n random but realistic workloads over the whole embedded
// snapshot: ~50% training, ~30% batch, ~20% inference, with quotas set to
// 80% of what the unconstrained plan uses per cloud × GPU family, so the
// quotas bind and the solver has to trade.
func benchFleet(tb testing.TB, cat *pricing.Catalog, n int) *policy.Policy {
	r := rand.New(rand.NewPCG(uint64(n), 99))
	p := &policy.Policy{File: fmt.Sprintf("bench-%d", n), Horizon: 720 * time.Hour}
	// The quota benchmark: spot pools big enough never to bind (see
	// benchmarkSpotPools for the fleet with the default pool capacity).
	p.SpotCapacity.DefaultGPUsPerPool = 1 << 20
	spots := []policy.SpotPolicy{policy.SpotNever, policy.SpotPrefer, policy.SpotPrefer, policy.SpotOnly}
	for i := 0; i < n; i++ {
		w := policy.Workload{Name: fmt.Sprintf("w%05d", i), Team: fmt.Sprintf("team%d", r.IntN(10)),
			Spot: spots[r.IntN(len(spots))], RestartOverhead: time.Duration(5+r.IntN(25)) * time.Minute}
		switch k := r.IntN(10); {
		case k < 5:
			w.Kind = policy.Training
			w.GPU = policy.GPUNeed{Count: []int{1, 2, 4, 8, 8}[r.IntN(5)], MinMemoryGiB: []float64{24, 40, 80}[r.IntN(3)]}
			w.WorkGPUHours = float64(20 + r.IntN(2000))
			w.ReferenceGPU = pricing.A100_80
			w.CheckpointInterval = time.Duration(15+r.IntN(60)) * time.Minute
			if r.IntN(2) == 0 {
				w.Deadline = time.Duration(w.WorkGPUHours/float64(w.GPU.Count)*(1.2+r.Float64())) * time.Hour
			}
		case k < 8:
			w.Kind = policy.Batch
			w.GPU = policy.GPUNeed{Count: []int{1, 1, 2, 4}[r.IntN(4)], MinMemoryGiB: []float64{0, 16, 24}[r.IntN(3)]}
			w.WorkGPUHours = float64(5 + r.IntN(500))
			w.ReferenceGPU = pricing.T4
			w.CheckpointInterval = time.Duration(5+r.IntN(30)) * time.Minute
		default:
			w.Kind = policy.Inference
			w.GPU = policy.GPUNeed{Count: 1, MinMemoryGiB: []float64{16, 20, 40}[r.IntN(3)]}
			w.Replicas = policy.Replicas{Min: 1 + r.IntN(4)}
			w.Replicas.Max = w.Replicas.Min * (2 + r.IntN(2))
			w.Spread = policy.Spread{MinZones: r.IntN(3), MinClouds: r.IntN(2)}
		}
		if r.IntN(5) == 0 && w.Deadline == 0 {
			w.Limits.Residency = []string{[]string{"us", "eu"}[r.IntN(2)]}
		}
		p.Workloads = append(p.Workloads, w)
	}
	plan, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow})
	var inf *InfeasibleError
	if errors.As(err, &inf) && plan != nil {
		// A random job can be out of reach (deadline shorter than its
		// fastest option): the benchmark fleet keeps the placeable ones.
		blocked := map[string]bool{}
		for _, b := range inf.Blocked {
			blocked[b.Workload] = true
		}
		kept := p.Workloads[:0]
		for _, w := range p.Workloads {
			if !blocked[w.Name] {
				kept = append(kept, w)
			}
		}
		p.Workloads = kept
	} else if err != nil {
		tb.Fatal(err)
	}
	type cf struct {
		cloud  pricing.Cloud
		family string
	}
	used := map[cf]int{}
	for _, pl := range plan.Placements {
		for _, g := range pl.Groups {
			s, _ := pricing.Spec(g.GPU)
			used[cf{g.Cloud, s.Family}] += g.Instances * g.GPUsPerInstance
		}
	}
	for _, c := range pricing.Clouds() {
		for _, s := range pricing.Specs() {
			if u := used[cf{c, s.Family}]; u >= 8 && !hasQuota(p.Quotas, c, s.Family) {
				p.Quotas = append(p.Quotas, policy.Quota{Cloud: c, Family: s.Family, MaxGPUs: u * 8 / 10})
			}
		}
	}
	return p
}

func hasQuota(qs []policy.Quota, c pricing.Cloud, f string) bool {
	for _, q := range qs {
		if q.Cloud == c && q.Family == f {
			return true
		}
	}
	return false
}

func benchmarkSolve(b *testing.B, n int) {
	cat := embedded(b)
	p := benchFleet(b, cat, n)
	b.ReportAllocs()
	b.ResetTimer()
	var plan *Plan
	cpu0 := cputime.Process()
	for i := 0; i < b.N; i++ {
		var err error
		plan, err = Solve(Input{Catalog: cat, Policy: p, Now: testNow})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cputime.Process()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	b.ReportMetric(plan.Bound.GapPercent, "gap%")
	b.ReportMetric(float64(len(p.Quotas)), "quotas")
}

// benchmarkSpotPools is the same fleet with the default fleet-wide spot
// capacity per pool (64 GPUs), which its spot demand overfills: pool rows
// are generated lazily and bind.
func benchmarkSpotPools(b *testing.B, n int) {
	cat := embedded(b)
	p := benchFleet(b, cat, n)
	p.SpotCapacity.DefaultGPUsPerPool = policy.DefaultSpotCapacityGPUs
	b.ReportAllocs()
	b.ResetTimer()
	var plan *Plan
	cpu0 := cputime.Process()
	for i := 0; i < b.N; i++ {
		var err error
		plan, err = Solve(Input{Catalog: cat, Policy: p, Now: testNow})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cputime.Process()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	b.ReportMetric(plan.Bound.GapPercent, "gap%")
	b.ReportMetric(float64(len(plan.SpotPools)), "pools")
}

func BenchmarkSolveSpotPools100(b *testing.B)  { benchmarkSpotPools(b, 100) }
func BenchmarkSolveSpotPools1000(b *testing.B) { benchmarkSpotPools(b, 1000) }

func BenchmarkSolve100(b *testing.B)   { benchmarkSolve(b, 100) }
func BenchmarkSolve1000(b *testing.B)  { benchmarkSolve(b, 1000) }
func BenchmarkSolve10000(b *testing.B) { benchmarkSolve(b, 10000) }

// TestLargeInstanceGap reports the gap to the lower bound on a 1,000-workload
// fleet with binding quotas, and fails if it is far off the 0.5% target.
func TestLargeInstanceGap(t *testing.T) {
	if testing.Short() {
		t.Skip("large instance")
	}
	cat := embedded(t)
	p := benchFleet(t, cat, 1000)
	plan, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, cat, p, plan)
	t.Logf("1000 workloads, %d quotas: cost %.2f, lower bound %.2f, gap %.3f%%", len(p.Quotas), plan.Totals.ExpectedCost, plan.Bound.LowerBound, plan.Bound.GapPercent)
	if plan.Bound.GapPercent > 0.5 {
		t.Errorf("gap %.3f%% > 0.5%%", plan.Bound.GapPercent)
	}
}
