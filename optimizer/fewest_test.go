package optimizer

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// abstractFleet is a random instance at the solver's level: rows with
// capacities and workloads whose candidates take amounts of one or two
// rows, small enough for brute force.
func abstractFleet(r *rand.Rand) (*solver, []*eval) {
	nRows := 2 + r.IntN(4)
	s := &solver{caps: make([]float64, nRows)}
	for i := range s.caps {
		s.caps[i] = float64(4 + r.IntN(16))
	}
	n := 6 + r.IntN(9)
	evals := make([]*eval, n)
	for w := range evals {
		e := &eval{}
		k := 1 + r.IntN(4)
		for j := 0; j < k; j++ {
			o := option{cost: float64(1 + r.IntN(50))}
			for _, row := range r.Perm(nRows)[:1+r.IntN(2)] {
				o.uses = append(o.uses, use{row: int32(row), amt: float64(1 + r.IntN(6))})
			}
			slices.SortFunc(o.uses, func(a, b use) int { return int(a.row - b.row) })
			e.cands = append(e.cands, o)
		}
		slices.SortStableFunc(e.cands, func(a, b option) int { return int(a.cost - b.cost) })
		evals[w] = e
	}
	return s, evals
}

// bruteFewestOut is the fewest workloads of ws that must be left out, by
// exhaustive search, with every other workload absent.
func bruteFewestOut(s *solver, evals []*eval, ws []int) int {
	rem := append([]float64(nil), s.caps...)
	most := 0
	var rec func(i, placed int)
	rec = func(i, placed int) {
		if placed+len(ws)-i <= most {
			return
		}
		if i == len(ws) {
			most = placed
			return
		}
		for _, o := range evals[ws[i]].cands {
			ok := true
			for _, u := range o.uses {
				ok = ok && rem[u.row] >= u.amt
			}
			if !ok {
				continue
			}
			for _, u := range o.uses {
				rem[u.row] -= u.amt
			}
			rec(i+1, placed+1)
			for _, u := range o.uses {
				rem[u.row] += u.amt
			}
		}
		rec(i+1, placed)
	}
	rec(0, 0)
	return len(ws) - most
}

// TestFewestOutBruteForce: on random instances that cannot be placed
// whole, a failed feasibility search's core cannot be placed whole either
// (brute force over the core alone), and fewestOut, started from the
// regret greedy's partial plan, leaves out exactly as few as brute force
// says must be (its searches never run out of budget here, so the
// hitting set it ends with is the least).
func TestFewestOutBruteForce(t *testing.T) {
	partly, improved := 0, 0
	for seed := uint64(0); seed < 600; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		s, evals := abstractFleet(r)
		all := allIdx(len(evals))
		least := bruteFewestOut(s, evals, all)
		if least == 0 {
			continue
		}
		partly++
		st := newState(s, evals, slices.Repeat([]int{-1}, len(evals)))
		res := s.search(st, all, math.Inf(1), searchWork, true, nil)
		if res.pick != nil || !res.complete || len(res.core) == 0 {
			t.Fatalf("seed %d: %d must be left out, the search gave pick %v complete %v core %v", seed, least, res.pick, res.complete, res.core)
		}
		if bruteFewestOut(s, evals, res.core) == 0 {
			t.Fatalf("seed %d: core %v can be placed whole", seed, res.core)
		}
		// A partial plan: each workload on its cheapest fitting candidate.
		for w := range evals {
			if j := st.bestFit(w); j >= 0 {
				st.set(w, j)
			}
		}
		left := func() int {
			n := 0
			for _, c := range st.choice {
				if c < 0 {
					n++
				}
			}
			return n
		}
		was := left()
		s.fewestOut(st, all, res.core, 100*searchWork)
		got := left()
		if got != least {
			t.Errorf("seed %d: %d left out (greedy %d), brute force %d", seed, got, was, least)
		}
		if got < was {
			improved++
		}
		// What is placed fits every row.
		rem := append([]float64(nil), s.caps...)
		for w, c := range st.choice {
			if c >= 0 {
				for _, u := range evals[w].cands[c].uses {
					rem[u.row] -= u.amt
				}
			}
		}
		for row, v := range rem {
			if v < -eps {
				t.Fatalf("seed %d: row %d over by %g", seed, row, -v)
			}
		}
	}
	t.Logf("%d instances need some left out; fewestOut left out fewer than the greedy on %d", partly, improved)
	if partly < 150 || improved < 20 {
		t.Errorf("the generator is off: %d partly infeasible, %d improved", partly, improved)
	}
}

// TestMinHittingSet: the smallest set that hits every core, against brute
// force over subsets of a few members.
func TestMinHittingSet(t *testing.T) {
	for seed := uint64(0); seed < 500; seed++ {
		r := rand.New(rand.NewPCG(seed, 12))
		n := 3 + r.IntN(8)
		var cores [][]int
		for k := 0; k < 1+r.IntN(6); k++ {
			c := r.Perm(n)[:1+r.IntN(n)]
			slices.Sort(c)
			cores = append(cores, c)
		}
		least := n
		for mask := 0; mask < 1<<n; mask++ {
			ok := true
			for _, c := range cores {
				ok = ok && slices.ContainsFunc(c, func(w int) bool { return mask&(1<<w) != 0 })
			}
			if ok {
				least = min(least, bits.OnesCount(uint(mask)))
			}
		}
		nodes := 0
		got, ok := minHittingSet(cores, n, func(int) float64 { return 0 }, nil, &nodes)
		if !ok || len(got) != least {
			t.Fatalf("seed %d: cores %v: got %v (%v), want size %d", seed, cores, got, ok, least)
		}
		for _, c := range cores {
			if !slices.ContainsFunc(c, func(w int) bool { return slices.Contains(got, w) }) {
				t.Fatalf("seed %d: %v misses core %v", seed, got, c)
			}
		}
		if _, ok := minHittingSet(cores, least-1, func(int) float64 { return 0 }, nil, &nodes); ok {
			t.Fatalf("seed %d: a set smaller than %d reported", seed, least)
		}
	}
}
