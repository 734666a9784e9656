package optimizer

// RINS from a strongly cut whole-fleet LP, the last step of each sub-MIP
// search (subMIPLNS) of a one-off plan of a small fleet.
//
// The sub-MIP searches (subMIPLNS) take their RINS sets from the LP
// relaxation of the whole fleet after three rounds of eight Gomory cuts.
// On the hardest hardgen fleets that LP lies far below the optimum
// (150 / 44 at 0.5: 2,635–2,781 below a plan 137 above the optimum), so
// the workloads where it differs from the plan are not the ones a
// cheaper plan moves. Ten rounds of twenty cuts bring it to 547–665
// below, about where CBC's root lies after its own cuts (93,716 on that
// fleet): the LP then points at the moves, and a best-bound-first search
// of the 25 workloads it differs from the plan most on, with the same
// cuts at its root, finds 94,259.85 (0.030% above CBC's optimum,
// 94,231.51; 0.146% before). A whole-fleet branch and bound with the same
// cuts found nothing in 2,000 nodes (docs/BENCHMARKS.md, "Session 28").

// strongCuts is the whole-fleet LP's and the sets' cut plan. A sub-MIP
// cut so is also pruned by least use (pruneByLeastUse), and searched with
// strong branching when best first (strongbranch.go).
var strongCuts = cutPlan{rows: 200, rounds: 10, perRound: 20}

// strongRINSSizes are the set sizes tried each round, the workloads the
// LP moves most first (all of them when fewer); strongRINSNodes is each
// set's best-first node limit; strongRINSRounds the most improvements.
var strongRINSSizes = [...]int{15, 25, 40, 60, 90}

const (
	strongRINSNodes  = 500
	strongRINSRounds = 10
)

// strongRINS improves st's plan by sub-MIPs over the workloads where
// the strongly cut whole-fleet LP differs from it (strongCuts), and when
// none improves, over those grown by the workloads that lift their root
// gap most (grownStrong), until a round finds nothing. Each move is kept only when the plan's own
// check accepts it and it is cheaper (solveSetCut), so the plan never
// gets dearer.
func (s *solver) strongRINS(st *state) {
	for round := 0; round < strongRINSRounds; round++ {
		m, orig, restore := s.fleetRelaxationCut(st, strongCuts)
		if m == nil {
			restore()
			break
		}
		off := m.offPlan(m.p, orig, -1)
		restore()
		improved := false
		for _, size := range strongRINSSizes {
			n := min(size, len(off))
			if ok, _, _ := s.solveSetCut(st, off[:n], strongRINSNodes, true, strongCuts); ok {
				improved = true
				break
			}
			if n == len(off) {
				break
			}
		}
		if !improved {
			// The moves that make room, which the LP does not show.
			improved = s.grownStrong(st, off)
		}
		if !improved {
			break
		}
	}
}
