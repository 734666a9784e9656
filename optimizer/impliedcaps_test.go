package optimizer

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// TestImpliedCaps: a family quota over the clouds whose own quotas of that
// family sum to less is lowered to that sum; it is left alone when some
// cloud selling the family has no quota of its own, and a quota of another
// family is never touched.
func TestImpliedCaps(t *testing.T) {
	offers := []pricing.Offer{
		{Cloud: pricing.AWS, Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5", GPU: pricing.H100, GPUCount: 8, OnDemandPrice: 98, SpotPrice: 40},
		{Cloud: pricing.GCP, Region: "us-central1", Zone: "us-central1-a", InstanceType: "a3", GPU: pricing.H100, GPUCount: 8, OnDemandPrice: 88},
		{Cloud: pricing.Azure, Region: "eastus", InstanceType: "nd", GPU: pricing.H100, GPUCount: 8, OnDemandPrice: 90},
		{Cloud: pricing.AWS, Region: "us-east-1", Zone: "us-east-1a", InstanceType: "g4", GPU: pricing.T4, GPUCount: 1, OnDemandPrice: 0.5},
	}
	cases := []struct {
		name   string
		quotas []policy.Quota
		want   []float64
	}{
		{"covered", []policy.Quota{
			{Cloud: pricing.AWS, Family: "H100", MaxGPUs: 16},
			{Cloud: pricing.GCP, Family: "H100", MaxGPUs: 8},
			{Cloud: pricing.Azure, Family: "H100", MaxGPUs: 24},
			{Family: "H100", MaxGPUs: 100},
			{Family: "T4", MaxGPUs: 5},
		}, []float64{16, 8, 24, 48, 5}},
		{"family cap below the sum", []policy.Quota{
			{Cloud: pricing.AWS, Family: "H100", MaxGPUs: 16},
			{Cloud: pricing.GCP, Family: "H100", MaxGPUs: 8},
			{Cloud: pricing.Azure, Family: "H100", MaxGPUs: 24},
			{Family: "H100", MaxGPUs: 40},
		}, []float64{16, 8, 24, 40}},
		{"azure not covered", []policy.Quota{
			{Cloud: pricing.AWS, Family: "H100", MaxGPUs: 16},
			{Cloud: pricing.GCP, Family: "H100", MaxGPUs: 8},
			{Family: "H100", MaxGPUs: 100},
		}, []float64{16, 8, 100}},
		{"nested, and rows over the same offers: the smaller cap", []policy.Quota{
			{Cloud: pricing.AWS, Family: "H100", MaxGPUs: 16},
			{Cloud: pricing.AWS, Region: "us-*", Family: "H100", MaxGPUs: 12},
			{Cloud: pricing.GCP, MaxGPUs: 8},
			{Cloud: pricing.Azure, MaxGPUs: 4},
			{Family: "H100", MaxGPUs: 100},
		}, []float64{12, 12, 8, 4, 24}},
	}
	cat := pricing.NewCatalog(offers, testNow, "test")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &policy.Policy{File: "t.yaml", Quotas: c.quotas}
			s := newSolver(Input{Catalog: cat.ForPlanning(), Policy: p, Now: testNow})
			got := s.impliedCaps()
			for i, w := range c.want {
				if got[i] != w {
					t.Errorf("quota %d (%s): implied cap %v, want %v", i, quotaName(c.quotas[i]), got[i], w)
				}
			}
		})
	}
}

// TestImpliedCapsBoundBelowBruteForce: on tiny random fleets given per-cloud
// quotas of one family and a family quota above their sum, no plan the
// exhaustive search finds takes more of a row than its implied cap, and
// the Lagrangian bound over the implied caps never exceeds the optimum.
func TestImpliedCapsBoundBelowBruteForce(t *testing.T) {
	compared, lowered, tighter := 0, 0, 0
	for seed := uint64(0); seed < 4000; seed++ {
		r := rand.New(rand.NewPCG(seed, 911))
		cat := randCatalog(r, 5+r.IntN(7))
		p := randPolicy(r, 2+r.IntN(3), false)
		fam := []string{"A100", "H100", "T4", "L4"}[r.IntN(4)]
		sum := 0
		for _, c := range pricing.Clouds() {
			n := 2 + r.IntN(24)
			sum += n
			p.Quotas = append(p.Quotas, policy.Quota{Cloud: c, Family: fam, MaxGPUs: n})
		}
		p.Quotas = append(p.Quotas, policy.Quota{Family: fam, MaxGPUs: sum + 1 + r.IntN(8)})
		if r.IntN(2) == 0 {
			p.SpotCapacity.DefaultGPUsPerPool = 1 + r.IntN(12)
		}
		opts := make([][]bfOption, len(p.Workloads))
		for i := range p.Workloads {
			w := &p.Workloads[i]
			if w.Kind == policy.Inference {
				opts[i] = bruteServiceOptions(p, cat, w)
			} else {
				opts[i] = bruteJobOptions(p, cat, w)
			}
		}
		best := bruteOptimum(p, opts)
		if math.IsInf(best, 1) {
			continue
		}
		in := Input{Catalog: cat, Policy: p, Now: testNow}
		s := newSolver(in)
		s.ctx, s.in = context.Background(), in
		evals, choice, blocked, _ := s.run()
		if len(blocked) > 0 {
			continue
		}
		caps := s.impliedCaps()
		for k := range caps {
			if caps[k] > s.caps[k] {
				t.Fatalf("seed %d: row %d implied cap %v above its cap %v", seed, k, caps[k], s.caps[k])
			}
			if caps[k] < s.caps[k] {
				lowered++
			}
		}
		// The same problem: the optimum with the quotas at their implied
		// caps is the optimum (pool rows are never lowered: no quota
		// counts spot GPUs of one pool alone).
		p2 := *p
		p2.Quotas = append([]policy.Quota(nil), p.Quotas...)
		for k := range p2.Quotas {
			if caps[k] != math.Trunc(caps[k]) {
				t.Fatalf("seed %d: quota %d implied cap %v is not whole GPUs", seed, k, caps[k])
			}
			p2.Quotas[k].MaxGPUs = int(caps[k])
		}
		for k := len(p.Quotas); k < len(caps); k++ {
			if caps[k] != s.caps[k] {
				t.Errorf("seed %d: row %s lowered from %v to %v", seed, s.rowName(int32(k)), s.caps[k], caps[k])
			}
		}
		if b2 := bruteOptimum(&p2, opts); math.Abs(b2-best) > 1e-6*best {
			t.Errorf("seed %d: optimum %.4f with the implied caps, %.4f without", seed, b2, best)
		}
		// The solver's own plan meets every row, so it must meet the
		// implied caps too.
		use := make([]float64, len(caps))
		for w, e := range evals {
			s.quotaUses(&e.cands[choice[w]], func(r int32, amt float64) { use[r] += amt })
		}
		for k := range use {
			if use[k] > caps[k]+eps {
				t.Errorf("seed %d: the plan takes %v of row %s, above its implied cap %v", seed, use[k], s.rowName(int32(k)), caps[k])
			}
		}
		s.lb = nil
		plain, _ := s.lowerBound(evals, best, nil, 400)
		s.boundCaps = caps
		lb, _ := s.lowerBound(evals, best, nil, 400)
		s.boundCaps = nil
		compared++
		if lb > plain+1e-6*plain {
			tighter++
		}
		if tol := 0.01 * float64(len(p.Workloads)); lb > best+tol {
			t.Errorf("seed %d: bound over the implied caps %.2f > optimum %.2f", seed, lb, best)
		}
	}
	t.Logf("compared %d fleets; %d rows lowered; the bound tighter on %d", compared, lowered, tighter)
	if compared < 300 || lowered < 100 {
		t.Errorf("only %d fleets compared, %d rows lowered", compared, lowered)
	}
}
