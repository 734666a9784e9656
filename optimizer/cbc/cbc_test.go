package cbc

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/optimizer/hardgen"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

func tinyModel() *optimizer.Model {
	return &optimizer.Model{
		Workloads: []string{"a", "b"},
		Costs:     [][]float64{{3, 4}, {2, 5}},
		Rows:      []optimizer.ModelRow{{Name: "quota", Cap: 8, Terms: []optimizer.ModelTerm{{W: 0, J: 0, Coef: 8}, {W: 1, J: 0, Coef: 8}}}},
	}
}

func TestWriteLP(t *testing.T) {
	var b bytes.Buffer
	if err := WriteLP(&b, tinyModel()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Minimize", " cost: + 3 x_0_0 + 4 x_0_1 + 2 x_1_0 + 5 x_1_1", "one_0: + x_0_0 + x_0_1 = 1", "row_0: + 8 x_0_0 + 8 x_1_0 <= 8", "Binary", "End"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("LP lacks %q:\n%s", want, b.String())
		}
	}
}

func TestParseSolution(t *testing.T) {
	m := tinyModel()
	tests := []struct {
		name, in   string
		wantStatus optimizer.ExactStatus
		wantChoice []int
		wantErr    string
	}{
		{name: "optimal", in: "Optimal - objective value 6.00000000\n      1 x_0_1  1  4\n      2 x_1_0  1  2\n",
			wantStatus: optimizer.ExactOptimal, wantChoice: []int{1, 0}},
		{name: "stopped with a solution", in: "Stopped on time - objective value 6.00000000\n 1 x_0_1 1 4\n 2 x_1_0 1 2\n",
			wantStatus: optimizer.ExactFeasible, wantChoice: []int{1, 0}},
		{name: "infeasible", in: "Infeasible - objective value 3.00000000\n 0 x_0_0 1 0\n", wantStatus: optimizer.ExactInfeasible},
		{name: "no integer solution", in: "Stopped on time (no integer solution - continuous used) - objective value 5\n", wantStatus: optimizer.ExactUnknown},
		{name: "stopped, incomplete", in: "Stopped on time - objective value 6\n 1 x_0_1 1 4\n", wantStatus: optimizer.ExactUnknown},
		{name: "empty", in: "", wantErr: "empty"},
		{name: "bad status", in: "Hello\n", wantErr: "unknown status"},
		{name: "unknown variable", in: "Optimal - objective value 1\n 0 y 1 0\n", wantErr: "unknown variable"},
		{name: "out of range", in: "Optimal - objective value 1\n 0 x_7_0 1 0\n", wantErr: "unknown variable"},
		{name: "two options", in: "Optimal - objective value 1\n 0 x_0_0 1 0\n 1 x_0_1 1 0\n", wantErr: "two options"},
		{name: "bad value", in: "Optimal - objective value 1\n 0 x_0_0 one 0\n", wantErr: "value"},
		{name: "optimal but incomplete", in: "Optimal - objective value 1\n 0 x_0_0 1 0\n", wantErr: "no option"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := ParseSolution(strings.NewReader(tt.in), m, optimizer.ExactResult{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tt.wantStatus || !equal(res.Choice, tt.wantChoice) {
				t.Errorf("got %s %v, want %s %v", res.Status, res.Choice, tt.wantStatus, tt.wantChoice)
			}
		})
	}
}

func FuzzParseSolution(f *testing.F) {
	f.Add("Optimal - objective value 6.00000000\n      1 x_0_1  1  4\n      2 x_1_0  1  2\n")
	f.Add("Infeasible - objective value 3\n")
	f.Add("Stopped on time - objective value 6\n ** 1 x_0_1 1 4\n")
	f.Fuzz(func(t *testing.T, in string) {
		m := tinyModel()
		res, err := ParseSolution(strings.NewReader(in), m, optimizer.ExactResult{})
		if err == nil && res.Choice != nil {
			if len(res.Choice) != 2 {
				t.Fatalf("choice %v", res.Choice)
			}
			for w, j := range res.Choice {
				if j < 0 || j >= len(m.Costs[w]) {
					t.Fatalf("choice %v out of range", res.Choice)
				}
			}
		}
	})
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// requireCBC returns the installed CBC, or skips (fails under CI=true,
// where .ci/run installs coinor-cbc).
func requireCBC(t *testing.T) *Solver {
	t.Helper()
	s, err := Find()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v; CI must not skip", err)
		}
		t.Skipf("%v: skipping the MILP comparison", err)
	}
	return s
}

func TestSolveModelTiny(t *testing.T) {
	s := requireCBC(t)
	res, err := s.SolveModel(context.Background(), tinyModel(), []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != optimizer.ExactOptimal || !equal(res.Choice, []int{1, 0}) || math.Abs(res.Objective-6) > 1e-6 {
		t.Errorf("got %+v, want optimal [1 0] at 6", res)
	}
	m := tinyModel()
	m.Rows[0].Cap = 4
	m.Rows = append(m.Rows, optimizer.ModelRow{Name: "q2", Cap: 4, Terms: []optimizer.ModelTerm{{W: 0, J: 1, Coef: 8}, {W: 1, J: 1, Coef: 8}}})
	res, err = s.SolveModel(context.Background(), m, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != optimizer.ExactInfeasible {
		t.Errorf("got %+v, want infeasible", res)
	}
}

// TestMILPComparison compares the heuristic with CBC on small seeded hard
// fleets (hardgen: quotas at the feasibility edge, overlapping quotas and
// budgets, spot and inference mixed) over the same candidates and cost
// model: the heuristic must place every fleet CBC places, never beat
// CBC's proven optimum (which would mean a broken constraint), pass the
// differential test's own check of every rule (checkBoth), keep its
// lower bound under that optimum, and stay close to it: none above the
// issue's 0.1% target and a median of at most 0.01% (every seed is at
// 0.000% today, docs/BENCHMARKS.md; the margin is for floating-point
// ties that another platform may break differently).
func TestMILPComparison(t *testing.T) {
	s := requireCBC(t)
	s.TimeLimit = 20 * time.Second
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	offers := catalogOffers(cat)
	var gaps []float64
	for seed := uint64(1); seed <= 12; seed++ {
		n := 10 + int(seed)*5
		tight := []float64{0.3, 0.5, 0.7}[seed%3]
		p, err := hardgen.Generate(cat, n, seed, hardgen.Options{Tightness: tight})
		if err != nil {
			t.Fatal(err)
		}
		now := cat.GeneratedAt.Add(time.Hour)
		h, herr := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: p, Now: now})
		x, xerr := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: p, Now: now, Solver: optimizer.SolverExact, Exact: s})
		if xerr != nil {
			if errors.Is(xerr, optimizer.ErrInfeasible) && herr != nil {
				continue
			}
			t.Fatalf("seed %d: exact: %v", seed, xerr)
		}
		if herr != nil {
			t.Errorf("seed %d: CBC places every workload, the heuristic says %v", seed, herr)
			continue
		}
		if !strings.Contains(x.Solver, "cbc") {
			t.Fatalf("seed %d: solver %q did not run cbc", seed, x.Solver)
		}
		checkBoth(t, seed, p, offers, h, x)
		opt := x.Totals.ExpectedCost
		if h.Totals.ExpectedCost < opt-0.01*float64(n) {
			t.Errorf("seed %d: heuristic %.2f below CBC's %.2f (%s)", seed, h.Totals.ExpectedCost, opt, x.Solver)
		}
		if h.Bound.LowerBound > opt+0.01*float64(n) {
			t.Errorf("seed %d: heuristic's lower bound %.2f above CBC's plan %.2f", seed, h.Bound.LowerBound, opt)
		}
		gap := 100 * (h.Totals.ExpectedCost - opt) / opt
		gaps = append(gaps, gap)
		t.Logf("seed %d n=%d tight=%.1f: heuristic %.2f, %s %.2f, gap %.3f%%", seed, len(p.Workloads), tight, h.Totals.ExpectedCost, x.Solver, opt, gap)
		if gap > 0.1 {
			t.Errorf("seed %d: heuristic %.3f%% above CBC", seed, gap)
		}
	}
	sort.Float64s(gaps)
	if len(gaps) < 8 {
		t.Fatalf("only %d fleets compared", len(gaps))
	}
	t.Logf("gaps: median %.3f%%, max %.3f%%", gaps[len(gaps)/2], gaps[len(gaps)-1])
	if gaps[len(gaps)/2] > 0.01 {
		t.Errorf("median gap %.3f%% above 0.01%%", gaps[len(gaps)/2])
	}
}

// checkBoth checks the heuristic's plan h and exact mode's x against every
// rule of the policy, with the differential test's own accounting: a plan
// cheaper than the other must be a plan.
func checkBoth(t *testing.T, seed uint64, p *policy.Policy, offers map[string]pricing.Offer, h, x *optimizer.Plan) {
	t.Helper()
	for _, pl := range []struct {
		name string
		plan *optimizer.Plan
	}{{"heuristic", h}, {"exact", x}} {
		for _, e := range checkPlanAgainstPolicy(p, offers, pl.plan) {
			t.Errorf("seed %d: %s plan: %s", seed, pl.name, e)
		}
	}
}

// TestMILPComparisonSpotPools is TestMILPComparison on hard fleets whose
// spot pools are held to half the most the unconstrained plan puts in one
// (spot_capacity.default_gpus_per_pool): the exact model carries the pool
// rows, and the heuristic must place what CBC places, never beat it, keep
// its bound under it and stay within the 0.1% on every seed, a
// median of at most 0.01% (all 0.000% today).
func TestMILPComparisonSpotPools(t *testing.T) {
	s := requireCBC(t)
	s.TimeLimit = 20 * time.Second
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	offers := catalogOffers(cat)
	var gaps []float64
	withRows := 0
	for seed := uint64(1); seed <= 6; seed++ {
		n := 15 + int(seed)*5
		p, err := hardgen.Generate(cat, n, seed, hardgen.Options{Tightness: 0.6, SpotPools: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		now := cat.GeneratedAt.Add(time.Hour)
		m, err := optimizer.BuildModel(optimizer.Input{Catalog: cat, Policy: p, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		rows := 0
		for _, r := range m.Rows {
			if strings.HasPrefix(r.Name, "spot pool ") {
				rows++
			}
		}
		h, herr := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: p, Now: now})
		x, xerr := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: p, Now: now, Solver: optimizer.SolverExact, Exact: s})
		if xerr != nil {
			if errors.Is(xerr, optimizer.ErrInfeasible) && herr != nil {
				continue
			}
			t.Fatalf("seed %d: exact: %v", seed, xerr)
		}
		if herr != nil {
			t.Errorf("seed %d: CBC places every workload, the heuristic says %v", seed, herr)
			continue
		}
		checkBoth(t, seed, p, offers, h, x)
		bound := 0
		for _, sp := range x.SpotPools {
			if sp.Constrained {
				bound++
			}
			if sp.UsedGPUs > sp.CapacityGPUs {
				t.Errorf("seed %d: exact plan overfills %s: %d of %d", seed, sp.Pool, sp.UsedGPUs, sp.CapacityGPUs)
			}
		}
		for _, sp := range h.SpotPools {
			if sp.UsedGPUs > sp.CapacityGPUs {
				t.Errorf("seed %d: heuristic overfills %s: %d of %d", seed, sp.Pool, sp.UsedGPUs, sp.CapacityGPUs)
			}
		}
		if rows > 0 && bound > 0 {
			withRows++
		}
		opt := x.Totals.ExpectedCost
		// Solve's exact mode sees the pool rows generated so far; CBC on
		// the full model, every pool row written out, must agree. Jobs'
		// candidates are the same either way; a service's are the layouts
		// enumerated around the rows that exist, so the two may differ by
		// a little (seen: 0.06%).
		full, err := s.SolveModel(context.Background(), m, nil)
		if err != nil {
			t.Fatal(err)
		}
		if full.Status == optimizer.ExactOptimal && math.Abs(full.Objective-opt) > 0.005*opt {
			t.Errorf("seed %d: CBC on the full model %.2f, exact mode %.2f", seed, full.Objective, opt)
		}
		if h.Totals.ExpectedCost < opt-0.01*float64(n) {
			t.Errorf("seed %d: heuristic %.2f below CBC's %.2f (%s)", seed, h.Totals.ExpectedCost, opt, x.Solver)
		}
		if h.Bound.LowerBound > opt+0.01*float64(n) {
			t.Errorf("seed %d: heuristic's lower bound %.2f above CBC's plan %.2f", seed, h.Bound.LowerBound, opt)
		}
		gap := 100 * (h.Totals.ExpectedCost - opt) / opt
		gaps = append(gaps, gap)
		t.Logf("seed %d n=%d pool cap %d (%d pool rows in the full model, %d held in the plan): heuristic %.2f, %s %.2f, gap %.3f%%",
			seed, len(p.Workloads), p.SpotCapacity.DefaultGPUsPerPool, rows, bound, h.Totals.ExpectedCost, x.Solver, opt, gap)
		if gap > 0.1 {
			t.Errorf("seed %d: heuristic %.3f%% above CBC", seed, gap)
		}
	}
	sort.Float64s(gaps)
	if len(gaps) < 5 || withRows < 3 {
		t.Fatalf("only %d fleets compared, %d with binding pool rows", len(gaps), withRows)
	}
	t.Logf("gaps: median %.3f%%, max %.3f%%", gaps[len(gaps)/2], gaps[len(gaps)-1])
	if gaps[len(gaps)/2] > 0.01 {
		t.Errorf("median gap %.3f%% above 0.01%%", gaps[len(gaps)/2])
	}
}
