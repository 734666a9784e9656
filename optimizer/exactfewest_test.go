package optimizer

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// bruteExact is an ExactSolver for tiny models: depth-first search over
// every workload's options with the rows checked on the way and the cost
// of the cheapest remaining options as its bound. Its answer is proven
// optimal (it never stops early).
type bruteExact struct{}

func (bruteExact) SolveModel(_ context.Context, m *Model, start []int) (ExactResult, error) {
	n := len(m.Costs)
	rowsOf := make([][]map[int]float64, n) // w → j → row → coef
	for w := range rowsOf {
		rowsOf[w] = make([]map[int]float64, len(m.Costs[w]))
	}
	for r, row := range m.Rows {
		for _, t := range row.Terms {
			if rowsOf[t.W][t.J] == nil {
				rowsOf[t.W][t.J] = map[int]float64{}
			}
			rowsOf[t.W][t.J][r] += t.Coef
		}
	}
	rest := make([]float64, n+1) // cheapest cost of workloads w.. n-1
	for w := n - 1; w >= 0; w-- {
		rest[w] = rest[w+1] + slices.Min(m.Costs[w])
	}
	used := make([]float64, len(m.Rows))
	cur := make([]int, n)
	best, bestCost := []int(nil), math.Inf(1)
	if start != nil && m.Check(start) == nil {
		best, bestCost = slices.Clone(start), m.Cost(start)
	}
	var rec func(w int, cost float64)
	rec = func(w int, cost float64) {
		if cost+rest[w] >= bestCost-1e-9 {
			return
		}
		if w == n {
			best, bestCost = slices.Clone(cur), cost
			return
		}
		for j, c := range m.Costs[w] {
			ok := true
			for r, a := range rowsOf[w][j] {
				ok = ok && used[r]+a <= m.Rows[r].Cap+1e-9
			}
			if !ok {
				continue
			}
			for r, a := range rowsOf[w][j] {
				used[r] += a
			}
			cur[w] = j
			rec(w+1, cost+c)
			for r, a := range rowsOf[w][j] {
				used[r] -= a
			}
		}
	}
	rec(0, 0)
	if best == nil {
		return ExactResult{Status: ExactInfeasible, Solver: "brute"}, nil
	}
	return ExactResult{Status: ExactOptimal, Choice: best, Objective: bestCost, BestBound: bestCost, Solver: "brute"}, nil
}

// TestExactFewest: in exact mode a partly infeasible plan goes to the
// exact solver as "how few must be left out" (exactFewest). A plan that
// leaves out more than needed is replaced by the solver's, with the new
// plan's reasons; one that leaves out the fewest keeps its workloads left
// out, and where the model holds every option (jobs only) a "not proven"
// becomes the solver's proof. With a service the model holds the kept
// layouts only: no proof is claimed.
func TestExactFewest(t *testing.T) {
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	const jobs = `version: 1
quotas:
  - {cloud: aws, max_gpus: 16}
workloads:
  - name: big
    kind: training
    gpu: {models: [H100], count: 16}
    work: {gpu_hours: 320}
    deadline: 72h
    placement: {clouds: [aws]}
  - name: a
    kind: training
    gpu: {models: [H100], count: 8}
    work: {gpu_hours: 80}
    deadline: 72h
    placement: {clouds: [aws]}
  - name: b
    kind: training
    gpu: {models: [H100], count: 8}
    work: {gpu_hours: 80}
    deadline: 72h
    placement: {clouds: [aws]}
`
	const service = `  - name: serve
    kind: inference
    gpu: {models: [L4], count: 1}
    replicas: {min: 1, max: 1}
    placement: {clouds: [gcp]}
`
	for _, tc := range []struct {
		name, yaml string
		// first is placed first by the greedy that makes the "heuristic's"
		// plan; left is what that plan leaves out.
		first     string
		left      int
		wantOut   string
		wantProof string
	}{
		{"too-many-out", jobs, "big", 2, "big", "exact solver (brute) proved that no plan leaves out fewer than 1 workload"},
		{"fewest-not-proven", jobs, "a", 1, "big", "exact solver (brute) proved that no plan leaves out fewer than 1 workload"},
		{"services", jobs + service, "big", 2, "big", proofExactLimit},
		{"services-fewest", jobs + service, "a", 1, "big", proofLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := policy.Parse(tc.name+".yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			p.SetDefaults()
			in := Input{Catalog: cat, Policy: p, Now: cat.GeneratedAt.Add(time.Hour), Solver: SolverExact, Exact: bruteExact{}}
			s, evals := fullRowSolver(in)
			s.ctx = context.Background()
			if !s.useExact(evals) {
				t.Fatal("exact mode does not run on this fleet")
			}
			order := []int{}
			for w, e := range evals {
				if e.w.Name == tc.first {
					order = append([]int{w}, order...)
				} else {
					order = append(order, w)
				}
			}
			st := newState(s, evals, noneKept(len(evals)))
			for _, w := range order {
				for j := range evals[w].cands {
					if st.fits(evals[w], &evals[w].cands[j]) {
						st.set(w, j)
						break
					}
				}
			}
			var blocked []Blocked
			for w, c := range st.choice {
				if c < 0 {
					b := s.fleetBlocked(st, w)
					b.Proof = proofLimit
					blocked = append(blocked, b)
				}
			}
			if len(blocked) != tc.left {
				t.Fatalf("the greedy plan leaves %d out, want %d: %+v", len(blocked), tc.left, blocked)
			}
			got, left := s.exactFewest(evals, slices.Clone(st.choice), blocked)
			if len(left) != 1 || left[0].Workload != tc.wantOut {
				t.Fatalf("left out %+v, want only %s", left, tc.wantOut)
			}
			if left[0].Proof != tc.wantProof {
				t.Errorf("proof %q, want %q", left[0].Proof, tc.wantProof)
			}
			if left[0].Constraint != "quota" || !strings.Contains(left[0].Reason, "aws") {
				t.Errorf("reason %s: %s, want the aws quota", left[0].Constraint, left[0].Reason)
			}
			// Every other workload placed, within the rows.
			st2 := newState(s, evals, noneKept(len(evals)))
			for w, c := range got {
				if evals[w].w.Name == tc.wantOut {
					if c >= 0 {
						t.Errorf("%s placed and left out", tc.wantOut)
					}
					continue
				}
				if c < 0 {
					t.Fatalf("%s not placed", evals[w].w.Name)
				}
				if !st2.fits(evals[w], &evals[w].cands[c]) {
					t.Fatalf("%s's option breaks a row", evals[w].w.Name)
				}
				st2.set(w, c)
			}
		})
	}
}
