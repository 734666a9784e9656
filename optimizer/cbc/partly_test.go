package cbc

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// TestExactPartlyInfeasible: in exact mode a fleet that must leave a
// workload out (differential seed 44: one of 24 on a quota) used to hand
// CBC the whole fleet, whose model asks every workload to be placed, and
// report "exact (cbc: infeasible)" beside the heuristic's plan. CBC now
// solves the placed part: proven optimal, at CBC's optimum for the same
// workload left out (9,071.76; docs/plan.md, partly infeasible plans).
func TestExactPartlyInfeasible(t *testing.T) {
	s := requireCBC(t)
	s.TimeLimit = 30 * time.Second
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load(filepath.Join("..", "testdata", "differential", "partly-infeasible-polish-44.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p.SetDefaults()
	plan, err := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: p, Now: cat.GeneratedAt.Add(time.Hour),
		Solver: optimizer.SolverExact, Exact: s})
	if !errors.Is(err, optimizer.ErrInfeasible) {
		t.Fatalf("err %v, want a workload left out", err)
	}
	if !strings.Contains(plan.Solver, "optimal") {
		t.Errorf("solver %q, want CBC's proven optimum of the placed part", plan.Solver)
	}
	const optimum = 9071.7564 // CBC's, over BuildModel's model, the same left out
	if got := plan.Totals.ExpectedCost; got > optimum+0.005*float64(len(plan.Placements)) {
		t.Errorf("plan costs %.4f, CBC's optimum for the same left out is %.4f", got, optimum)
	}
}
