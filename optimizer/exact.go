package optimizer

import (
	"context"
	"fmt"
	"math"
)

// Solver modes (Input.Solver).
const (
	// SolverHeuristic is the Lagrangian heuristic with local search and,
	// on small fleets, branch and bound (the default).
	SolverHeuristic = "heuristic"
	// SolverExact also hands the fleet problem to Input.Exact, warm
	// started from the heuristic's plan, and keeps the better plan.
	SolverExact = "exact"
	// SolverAuto is SolverExact when Input.Exact is set and the problem
	// has at most AutoExactVariables variables, else SolverHeuristic.
	SolverAuto = "auto"
)

// AutoExactVariables is the largest model (candidate options over all
// workloads) SolverAuto gives to the exact solver: beyond it CBC rarely
// proves optimality within a minute on two cores (docs/BENCHMARKS.md).
const AutoExactVariables = 20_000

// Model is the fleet problem as a 0-1 program: each workload w takes
// exactly one of its candidate options j (variable x_wj, cost Costs[w][j]),
// and every row's Σ coef·x stays within its capacity. The candidates are
// the solver's: every option of a job that is not dominated (the cheapest
// per set of quota rows it uses), and for services the layouts it
// enumerated (docs/plan.md).
type Model struct {
	Workloads []string
	Costs     [][]float64
	Rows      []ModelRow
}

// ModelRow is one quota (GPUs), budget (USD a month) or spot pool
// capacity (GPUs) row.
type ModelRow struct {
	Name  string
	Cap   float64
	Terms []ModelTerm
}

// ModelTerm is coef·x_wj in a row.
type ModelTerm struct {
	W, J int
	Coef float64
}

// ExactStatus is how far an exact solver got.
type ExactStatus string

// Exact solver outcomes.
const (
	ExactOptimal    ExactStatus = "optimal"    // proven optimal over the model
	ExactFeasible   ExactStatus = "feasible"   // a solution, optimality not proven (time limit)
	ExactInfeasible ExactStatus = "infeasible" // proven: no solution places every workload
	ExactUnknown    ExactStatus = "unknown"    // stopped with no solution and no proof
)

// ExactResult is an exact solver's answer.
type ExactResult struct {
	Status ExactStatus
	// Choice is the option per workload (nil without a solution).
	Choice []int
	// Objective is the solution's cost; BestBound the solver's proven
	// lower bound over the model (0 when it reports none).
	Objective, BestBound float64
	// Solver names the solver and version ("cbc 2.10.8").
	Solver string
}

// ExactSolver solves a Model; start, when not nil, is a feasible solution
// to warm start from. The cbc package implements it by running CBC.
type ExactSolver interface {
	SolveModel(ctx context.Context, m *Model, start []int) (ExactResult, error)
}

// model builds the 0-1 program of the workloads' candidates.
func (s *solver) model(evals []*eval) *Model {
	m := &Model{Workloads: make([]string, len(evals)), Costs: make([][]float64, len(evals)), Rows: make([]ModelRow, len(s.caps))}
	for r := range s.caps {
		m.Rows[r].Cap = s.caps[r]
		m.Rows[r].Name = s.rowName(int32(r))
	}
	for w, e := range evals {
		m.Workloads[w] = e.w.Name
		m.Costs[w] = make([]float64, len(e.cands))
		for j := range e.cands {
			o := &e.cands[j]
			m.Costs[w][j] = o.cost
			for _, u := range o.uses {
				m.Rows[u.row].Terms = append(m.Rows[u.row].Terms, ModelTerm{w, j, u.amt})
			}
			for _, r := range e.budgetRows {
				m.Rows[r].Terms = append(m.Rows[r].Terms, ModelTerm{w, j, o.budgetUse})
			}
		}
	}
	return m
}

// Variables is the number of 0-1 variables.
func (m *Model) Variables() int {
	n := 0
	for _, c := range m.Costs {
		n += len(c)
	}
	return n
}

// Check verifies a choice against the model: one option per workload and
// every row within capacity (a relative tolerance of 1e-9 for rounding).
func (m *Model) Check(choice []int) error {
	if len(choice) != len(m.Costs) {
		return fmt.Errorf("%d choices for %d workloads", len(choice), len(m.Costs))
	}
	for w, j := range choice {
		if j < 0 || j >= len(m.Costs[w]) {
			return fmt.Errorf("workload %s: option %d of %d", m.Workloads[w], j, len(m.Costs[w]))
		}
	}
	for _, r := range m.Rows {
		sum := 0.0
		for _, t := range r.Terms {
			if choice[t.W] == t.J {
				sum += t.Coef
			}
		}
		if sum > r.Cap+1e-9*math.Max(1, r.Cap)+1e-6 {
			return fmt.Errorf("%s: %g over its cap %g", r.Name, sum, r.Cap)
		}
	}
	return nil
}

// Cost is the total cost of a choice.
func (m *Model) Cost(choice []int) float64 {
	sum := 0.0
	for w, j := range choice {
		sum += m.Costs[w][j]
	}
	return sum
}

// exact runs the exact solver on the fleet problem, warm started from
// choice when it places every workload. It returns the solver's answer,
// with Choice nil unless it is a checked plan no dearer than choice.
func (s *solver) exact(ctx context.Context, ex ExactSolver, evals []*eval, choice []int) (ExactResult, error) {
	m := s.model(evals)
	var start []int
	if choice != nil && m.Check(choice) == nil {
		start = choice
	}
	res, err := ex.SolveModel(ctx, m, start)
	if err != nil {
		return res, err
	}
	if res.Choice != nil {
		if err := m.Check(res.Choice); err != nil {
			return res, fmt.Errorf("exact solver's solution breaks the model: %w", err)
		}
		if start != nil && m.Cost(res.Choice) > m.Cost(start)+1e-6 {
			res.Choice = nil
		}
	}
	return res, nil
}

// BuildModel is the 0-1 program Solve would hand to an exact solver for
// the input, for benchmarks, independent checks and for writing the model
// out: every job's candidates after the static checks, every service's
// enumerated layouts plus those Solve adds while it solves (so the model
// holds every plan Solve can return), and a row for every spot pool the
// fleet could overfill. It plans on the catalog's ForPlanning offers, as
// Solve does. Workloads with no option are left out.
func BuildModel(in Input) (*Model, error) {
	if in.Catalog == nil || in.Policy == nil {
		return nil, fmt.Errorf("%w: catalog and policy are required", ErrInput)
	}
	// The offers Solve plans on: a spot price at or above on-demand is
	// not a spot option (without this the model had options Solve never
	// sees, and an exact solver "beat" the heuristic by using them).
	in.Catalog = in.Catalog.ForPlanning()
	s := newSolver(in)
	// The full model: every spot pool the fleet could overfill has its row.
	s.addPoolRows(s.potentialPools())
	all := make([]*eval, len(s.pol.Workloads))
	var svcs []int
	for i := range s.pol.Workloads {
		e := s.eval(&s.pol.Workloads[i])
		s.dropOversized(e)
		all[i] = e
		if e.svc != nil {
			svcs = append(svcs, i)
		}
	}
	if len(svcs) > 0 {
		// A service's candidates are layouts enumerated around the rows,
		// plus those Solve adds (column generation, repair): the model
		// holds them all, so it has every plan Solve can return (without
		// them CBC called a fleet infeasible that Solve placed, in the
		// differential test). Solve's rows may be fewer (pool rows are
		// cutting planes): each layout's rows are recomputed here.
		// Small fleets run two trajectories (portfolio.go), each with
		// layouts of its own: the model holds both's.
		runs := []Input{in}
		if portfolio(in) {
			runs = make([]Input, 2)
			for k, t := range []trajectory{quickStart, patientStart} {
				runs[k] = in
				runs[k].trajectory = t
			}
		}
		var hRuns [][]*eval
		for _, hin := range runs {
			h := newSolver(hin)
			h.ctx, h.in = context.Background(), hin
			hEvals, _, _, _ := h.run()
			hRuns = append(hRuns, hEvals)
		}
		for _, i := range svcs {
			e := all[i]
			seen := map[string]bool{}
			for j := range e.cands {
				seen[layoutSig(&e.cands[j])] = true
			}
			for _, hEvals := range hRuns {
				s.addLayoutsOf(e, hEvals[i], seen)
			}
			sortOptions(e.cands)
			if len(e.cands) > 0 {
				e.blocked = nil
			}
		}
	}
	var evals []*eval
	for _, e := range all {
		if e.blocked == nil {
			evals = append(evals, e)
		}
	}
	return s.model(evals), nil
}

// addLayoutsOf adds to e the service layouts of he (the same service in
// one of Solve's runs) that e does not have (seen, by layoutSig), their
// rows recomputed for s. A service the full rows leave without a layout
// of its own may still have one among Solve's (a repair's fitting
// layout): it is then in the model.
func (s *solver) addLayoutsOf(e, he *eval, seen map[string]bool) {
	if he == nil {
		return
	}
	for j := range he.cands {
		o := he.cands[j]
		if !o.valid() || o.groups == nil || seen[layoutSig(&o)] {
			continue
		}
		seen[layoutSig(&o)] = true
		s.layoutUses(&o)
		if s.oversized(e, &o) {
			continue
		}
		o.unit = int32(len(e.svc))
		e.svc = append(e.svc, o)
		e.cands = append(e.cands, o)
	}
}

// fewestModel is m with one more option per workload, "left out", costing
// 1 and using no row, every other option costing 0: its optimum is the
// fewest workloads any plan of the model must leave out. A pure count
// keeps the numbers small (a penalty above every plan's cost beside costs
// in cents would sit at the solver's tolerances); which of them to leave
// out, and the cost of the rest, the placed part's own solve decides.
func fewestModel(m *Model) *Model {
	out := &Model{Workloads: m.Workloads, Rows: m.Rows, Costs: make([][]float64, len(m.Costs))}
	for w, cs := range m.Costs {
		out.Costs[w] = make([]float64, len(cs)+1)
		out.Costs[w][len(cs)] = 1
	}
	return out
}

// exactFewest hands a partly infeasible fleet to the exact solver as the
// question the heuristic could not settle: how few workloads must be left
// out (fewestModel), warm started from the heuristic's plan. A plan that
// leaves fewer out replaces the heuristic's (its placed part is then
// solved again, polishPlaced); one CBC proves leaves out no fewer turns
// the heuristic's "not proven" into a proof where the model holds every
// option (jobs only). Differential seeds 9088, 14028 and 15093 (docs/
// BENCHMARKS.md) left one workload more out than needed, and without this
// exact mode ran CBC on the placed part only.
func (s *solver) exactFewest(evals []*eval, choice []int, blocked []Blocked) ([]int, []Blocked) {
	m := fewestModel(s.model(evals))
	start := make([]int, len(choice))
	for w, c := range choice {
		start[w] = c
		if c < 0 {
			start[w] = len(m.Costs[w]) - 1
		}
	}
	if m.Check(start) != nil {
		start = nil
	}
	res, err := s.in.Exact.SolveModel(s.ctx, m, start)
	if err == nil && res.Choice != nil {
		err = m.Check(res.Choice)
	}
	if err != nil {
		s.warnings = append(s.warnings, fmt.Sprintf("exact solver on how few workloads must be left out failed, the heuristic's stand: %v", err))
		return choice, blocked
	}
	complete := jobsOnly(evals)
	proven := res.Status == ExactOptimal && complete
	least := -1
	if res.Choice != nil {
		least = 0
		for w, j := range res.Choice {
			if j == len(m.Costs[w])-1 {
				least++
			}
		}
	}
	proof := ""
	if proven && least > 0 {
		proof = fmt.Sprintf("exact solver (%s) proved that no plan leaves out fewer than %s", res.Solver, countOf(least, "workload"))
	}
	if least < 0 || least >= len(blocked) {
		// The heuristic's plan stands; CBC may have proved it leaves out
		// as few as any.
		if proof != "" && least == len(blocked) {
			for i := range blocked {
				if blocked[i].Proof == proofLimit {
					blocked[i].Proof = proof
				}
			}
		}
		return choice, blocked
	}
	// CBC leaves fewer out: its placement (costs were not its concern)
	// replaces the heuristic's, and the reasons are those of the new plan.
	proofs := map[string]string{}
	for _, b := range blocked {
		proofs[b.Workload] = b.Proof
	}
	out := make([]int, len(choice))
	for w, j := range res.Choice {
		out[w] = j
		if j == len(m.Costs[w])-1 {
			out[w] = -1
		}
	}
	st := newState(s, evals, out)
	var left []Blocked
	for w, c := range out {
		if c >= 0 {
			continue
		}
		b := s.fleetBlocked(st, w)
		switch p := proofs[b.Workload]; {
		case proof != "":
			b.Proof = proof
		case p != "" && p != proofLimit:
			b.Proof = p
		default:
			b.Proof = proofExactLimit
		}
		left = append(left, b)
	}
	return out, left
}

// proofExactLimit is the proof of a workload the exact solver's plan
// leaves out without proving that fewer cannot be.
const proofExactLimit = "not proven: the exact solver's plan leaves it out, but it did not prove that fewer cannot be (time limit, or services whose layouts the model holds only in part)"
