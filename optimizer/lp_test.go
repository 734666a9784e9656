package optimizer

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// lpCase is a small program over [0,1]ⁿ: min c·x, rows[i]·x ≤ b[i] (= when eq[i]).
type lpCase struct {
	name string
	c    []float64
	rows [][]float64
	b    []float64
	eq   []bool
	want float64 // optimum; NaN: infeasible
}

func (tc lpCase) build(cuts int) *lp {
	cols := make([][]lpCol, len(tc.c))
	for i, r := range tc.rows {
		for j, a := range r {
			if a != 0 {
				cols[j] = append(cols[j], lpCol{row: i, coef: a})
			}
		}
	}
	return newLP(tc.c, cols, tc.b, tc.eq, cuts)
}

// checkLP verifies an optimal basis from the original data alone: x within
// its bounds and meeting every row, and a dual certificate (y ≤ 0 on the
// ≤ rows, reduced costs c - yA that are ≥ 0 where x is at 0 and ≤ 0 where
// x is at 1) whose dual objective equals c·x.
func checkLP(t *testing.T, tc lpCase, p *lp) {
	t.Helper()
	n := len(tc.c)
	x := make([]float64, n)
	obj := 0.0
	for j := range x {
		x[j] = p.value(j)
		if x[j] < -1e-7 || x[j] > 1+1e-7 {
			t.Fatalf("x[%d] = %g outside [0,1]", j, x[j])
		}
		obj += tc.c[j] * x[j]
	}
	for i, r := range tc.rows {
		lhs := 0.0
		for j, a := range r {
			lhs += a * x[j]
		}
		if lhs > tc.b[i]+1e-6 || tc.eq[i] && lhs < tc.b[i]-1e-6 {
			t.Fatalf("row %d: %g against %g (eq %v)", i, lhs, tc.b[i], tc.eq[i])
		}
	}
	// Row i's dual (scaled row: slack column n+i has cost 0, so its
	// reduced cost is -y'ᵢ).
	y := make([]float64, len(tc.rows))
	for i := range y {
		y[i] = -p.d[n+i] * p.scale[i]
		if !tc.eq[i] && y[i] > 1e-7 {
			t.Fatalf("dual of ≤ row %d is %g > 0", i, y[i])
		}
	}
	dual := 0.0
	for i := range y {
		dual += y[i] * tc.b[i]
	}
	for j := 0; j < n; j++ {
		rc := tc.c[j]
		for i, r := range tc.rows {
			rc -= y[i] * r[j]
		}
		switch {
		case x[j] < 1e-7 && rc < -1e-6, x[j] > 1-1e-7 && rc > 1e-6,
			x[j] > 1e-7 && x[j] < 1-1e-7 && math.Abs(rc) > 1e-6:
			t.Fatalf("x[%d] = %g with reduced cost %g", j, x[j], rc)
		}
		if rc < 0 {
			dual += rc // the upper bound's dual
		}
	}
	if math.Abs(dual-obj) > 1e-6*max(1, math.Abs(obj)) {
		t.Fatalf("primal %g, dual %g", obj, dual)
	}
	if math.Abs(p.objective()-obj) > 1e-6*max(1, math.Abs(obj)) {
		t.Fatalf("objective() %g, c·x %g", p.objective(), obj)
	}
}

func TestLPSmall(t *testing.T) {
	for _, tc := range []lpCase{
		{
			// One workload, two options; the cheaper one does not fit.
			name: "cheaper-full",
			c:    []float64{0, 3},
			rows: [][]float64{{1, 1}, {8, 0}},
			b:    []float64{1, 4},
			eq:   []bool{true, false},
			want: 1.5, // half of the 8-GPU option fills the 4 GPUs
		},
		{
			// Two workloads share a row of 8 GPUs; each 8-GPU cheap option.
			name: "shared-row",
			c:    []float64{0, 5, 0, 2},
			rows: [][]float64{{1, 1, 0, 0}, {0, 0, 1, 1}, {8, 0, 8, 0}},
			b:    []float64{1, 1, 8},
			eq:   []bool{true, true, false},
			want: 2, // the first takes the row
		},
		{
			name: "infeasible",
			c:    []float64{1, 1},
			rows: [][]float64{{1, 1}, {4, 4}},
			b:    []float64{1, 2},
			eq:   []bool{true, false},
			want: math.NaN(),
		},
		{
			// Budget row in dollars next to a GPU row (scaling).
			name: "budget",
			c:    []float64{0, 10, 30},
			rows: [][]float64{{1, 1, 1}, {1000, 4000, 100}, {8, 0, 8}},
			b:    []float64{1, 500, 16},
			eq:   []bool{true, false, false},
			want: 50.0 / 3, // 1000a + 100c = 500 with a + c = 1: c = 5/9
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.build(0)
			st := p.solve(1000, math.Inf(1))
			if math.IsNaN(tc.want) {
				if st != lpInfeasible {
					t.Fatalf("status %d, want infeasible", st)
				}
				return
			}
			if st != lpOptimal {
				t.Fatalf("status %d", st)
			}
			checkLP(t, tc, p)
			if got := p.objective(); math.Abs(got-tc.want) > 1e-6 {
				t.Fatalf("optimum %g, want %g", got, tc.want)
			}
		})
	}
}

// randomGAP is a random multiple-choice program: nw workloads with k
// options each, nr capacity rows with whole-number amounts.
func randomGAP(r *rand.Rand, nw, k, nr int) (lpCase, []int) {
	tc := lpCase{name: "random"}
	var colW []int
	n := nw * k
	tc.c = make([]float64, n)
	for w := 0; w < nw; w++ {
		row := make([]float64, n)
		for o := 0; o < k; o++ {
			j := w*k + o
			row[j] = 1
			tc.c[j] = float64(r.IntN(100))
			colW = append(colW, w)
		}
		tc.rows = append(tc.rows, row)
		tc.b = append(tc.b, 1)
		tc.eq = append(tc.eq, true)
	}
	for i := 0; i < nr; i++ {
		row := make([]float64, n)
		for j := range row {
			if r.IntN(3) == 0 {
				row[j] = float64(1 + r.IntN(8))
			}
		}
		tc.rows = append(tc.rows, row)
		tc.b = append(tc.b, float64(r.IntN(4*nw)))
		tc.eq = append(tc.eq, false)
	}
	return tc, colW
}

// bruteGAP is the integer optimum by enumeration (Inf: infeasible).
func bruteGAP(tc lpCase, nw, k int) float64 {
	best := math.Inf(1)
	pick := make([]int, nw)
	var rec func(w int, cost float64)
	rec = func(w int, cost float64) {
		if w == nw {
			for i := nw; i < len(tc.rows); i++ {
				lhs := 0.0
				for v, o := range pick {
					lhs += tc.rows[i][v*k+o]
				}
				if lhs > tc.b[i]+1e-9 {
					return
				}
			}
			best = min(best, cost)
			return
		}
		for o := 0; o < k; o++ {
			pick[w] = o
			rec(w+1, cost+tc.c[w*k+o])
		}
	}
	rec(0, 0)
	return best
}

// TestLPProperty: on random multiple-choice programs the LP optimum is
// certified by its dual (checkLP) and never above the integer optimum
// found by enumeration, and the branch and bound of submip.go (row
// tightening, cuts, dual simplex at the nodes) finds that integer
// optimum exactly, or proves there is none.
func TestLPProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 3))
	for it := 0; it < 2000; it++ {
		nw, k, nr := 1+r.IntN(6), 1+r.IntN(4), r.IntN(5)
		tc, colW := randomGAP(r, nw, k, nr)
		opt := bruteGAP(tc, nw, k)
		p := tc.build(0)
		st := p.solve(10000, math.Inf(1))
		if st == lpIterLimit {
			t.Fatalf("case %d: iteration limit", it)
		}
		if st == lpOptimal {
			checkLP(t, tc, p)
			if p.objective() > opt+1e-6 {
				t.Fatalf("case %d: LP %g above the integer optimum %g", it, p.objective(), opt)
			}
		} else if !math.IsInf(opt, 1) {
			t.Fatalf("case %d: LP infeasible, integer optimum %g", it, opt)
		}
		// Branch and bound over the same program, as newSubMIP builds
		// it (rows tightened, cut rows).
		cols := make([][]lpCol, len(tc.c))
		for i, row := range tc.rows {
			for j, a := range row {
				if a != 0 {
					cols[j] = append(cols[j], lpCol{row: i, coef: a})
				}
			}
		}
		b := append([]float64(nil), tc.b...)
		m := &subMIP{ws: make([]int, nw), colW: colW, cuts: subMIPCutPlan}
		for j := range tc.c {
			m.colJ = append(m.colJ, j%k)
		}
		m.amts = tightenRows(cols, colW, b, tc.eq)
		m.p = newLP(tc.c, cols, b, tc.eq, subMIPCuts)
		// The three searches, depth first, best bound first (grown RINS
		// sets) and best first with strong branching (strongRINS's
		// sets), from the same program.
		for _, search := range []struct {
			name string
			bb   func(cutoff float64, nodes int) ([]int, float64, int)
		}{{"depth first", m.bb}, {"best first", m.bbBest}, {"strong branching", m.bbStrongBest}} {
			pick, cost, _ := search.bb(math.Inf(1), 1_000_000)
			if math.IsInf(opt, 1) {
				if pick != nil {
					t.Fatalf("case %d: %s branch and bound found %v (%g) for an infeasible program", it, search.name, pick, cost)
				}
				continue
			}
			if pick == nil || math.Abs(cost-opt) > 1e-6 {
				t.Fatalf("case %d: %s branch and bound %v (%g), optimum %g", it, search.name, pick, cost, opt)
			}
			sum := 0.0
			for w, o := range pick {
				sum += tc.c[w*k+o]
			}
			if math.Abs(sum-opt) > 1e-6 {
				t.Fatalf("case %d: %s pick %v costs %g, optimum %g", it, search.name, pick, sum, opt)
			}
		}
		// The costs are whole numbers, as leastOutMIP's count: pruned to
		// the next whole number down after each plan (nextCutoff), every
		// search still ends at the optimum, finds it below a cutoff one
		// above it, and finds nothing below one at it.
		m.integral = true
		for _, search := range []struct {
			name string
			bb   func(cutoff float64, nodes int) ([]int, float64, int)
		}{{"depth first", m.bb}, {"best first", m.bbBest}, {"strong branching", m.bbStrongBest}} {
			if math.IsInf(opt, 1) {
				continue
			}
			for _, c := range []struct {
				cutoff float64
				want   float64
			}{{math.Inf(1), opt}, {m.nextCutoff(opt + 1), opt}, {m.nextCutoff(opt), math.Inf(1)}} {
				pick, cost, _ := search.bb(c.cutoff, 1_000_000)
				switch {
				case math.IsInf(c.want, 1) && pick != nil:
					t.Fatalf("case %d: whole costs, %s below cutoff %g found %v (%g); the optimum is %g", it, search.name, c.cutoff, pick, cost, opt)
				case !math.IsInf(c.want, 1) && (pick == nil || math.Abs(cost-opt) > 1e-6):
					t.Fatalf("case %d: whole costs, %s below cutoff %g found %v (%g), want the optimum %g", it, search.name, c.cutoff, pick, cost, opt)
				}
			}
		}
	}
}

// TestPruneByLeastUse: on random tiny sets of workloads with quota and
// budget rows, pruning never drops an option that some assignment of the
// whole set (one option each, every row within its room) uses, nor a
// kept option.
func TestPruneByLeastUse(t *testing.T) {
	r := rand.New(rand.NewPCG(30, 7))
	dropped := 0
	for it := 0; it < 3000; it++ {
		nw, k, nr := 2+r.IntN(4), 1+r.IntN(4), 1+r.IntN(3)
		st := &state{rem: make([]float64, nr)}
		for i := range st.rem {
			st.rem[i] = float64(r.IntN(12))
		}
		budget := int32(-1)
		if r.IntN(2) == 0 {
			budget = int32(nr)
			st.rem = append(st.rem, 50+200*r.Float64())
		}
		jss := make([][]int, nw)
		keep := make([]int, nw)
		ws := make([]int, nw)
		for w := 0; w < nw; w++ {
			e := &eval{}
			if budget >= 0 && r.IntN(3) > 0 {
				e.budgetRows = []int32{budget}
			}
			for j := 0; j < k; j++ {
				o := option{cost: 10 * r.Float64(), budgetUse: 100 * r.Float64()}
				for row := 0; row < nr; row++ {
					if r.IntN(2) == 0 {
						o.uses = append(o.uses, use{row: int32(row), amt: float64(1 + r.IntN(6))})
					}
				}
				e.cands = append(e.cands, o)
				jss[w] = append(jss[w], j)
			}
			st.evals = append(st.evals, e)
			ws[w] = w
			keep[w] = -1
			if r.IntN(4) == 0 {
				keep[w] = r.IntN(k)
			}
		}
		// Which options some feasible assignment of the whole set uses.
		used := make([][]bool, nw)
		for w := range used {
			used[w] = make([]bool, k)
		}
		pick := make([]int, nw)
		var rec func(w int)
		rec = func(w int) {
			if w == nw {
				for w2, j := range pick {
					used[w2][j] = true
				}
				return
			}
			for j := 0; j < k; j++ {
				e, o := st.evals[w], &st.evals[w].cands[j]
				if !st.fits(e, o) {
					continue
				}
				st.apply(e, o, 1)
				pick[w] = j
				rec(w + 1)
				st.apply(e, o, -1)
			}
		}
		rec(0)
		pruneByLeastUse(st, ws, jss, keep)
		for w := range ws {
			left := map[int]bool{}
			for _, j := range jss[w] {
				left[j] = true
			}
			for j := 0; j < k; j++ {
				if used[w][j] && !left[j] {
					t.Fatalf("case %d: workload %d option %d is in a feasible assignment but was pruned", it, w, j)
				}
				if keep[w] == j && !left[j] {
					t.Fatalf("case %d: workload %d's kept option %d was pruned", it, w, j)
				}
				if !left[j] {
					dropped++
				}
			}
		}
	}
	if dropped == 0 {
		t.Fatal("pruning dropped nothing in any case: the test does not exercise it")
	}
}

// TestLPProofRows: when the dual simplex proves a random program
// infeasible, the workloads whose rows its proof does not use (usedRow)
// can go, with their columns, and what is left is still infeasible — the
// step lpCore shrinks its cores by. Some proofs must leave a workload out,
// or the reduction would never fire.
func TestLPProofRows(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 7))
	infeasible, reduced := 0, 0
	for it := 0; it < 4000; it++ {
		nw, k, nr := 2+r.IntN(7), 1+r.IntN(3), 1+r.IntN(4)
		tc, _ := randomGAP(r, nw, k, nr)
		p := tc.build(0)
		if p.solve(10000, math.Inf(1)) != lpInfeasible {
			if p.usedRow(0) {
				t.Fatalf("case %d: a solve that proved nothing uses row 0", it)
			}
			continue
		}
		infeasible++
		var keep []int
		for w := 0; w < nw; w++ {
			if p.usedRow(w) {
				keep = append(keep, w)
			}
		}
		if len(keep) == 0 {
			// The capacity rows alone: a row whose room is below zero
			// cannot happen here (room ≥ 0), so some workload is in it.
			t.Fatalf("case %d: the proof uses no workload's row", it)
		}
		if len(keep) == nw {
			continue
		}
		reduced++
		sub := lpCase{name: "reduced"}
		for _, w := range keep {
			sub.c = append(sub.c, tc.c[w*k:(w+1)*k]...)
		}
		for i, row := range tc.rows {
			if i < nw && !slices.Contains(keep, i) {
				continue
			}
			var nr []float64
			for _, w := range keep {
				nr = append(nr, row[w*k:(w+1)*k]...)
			}
			sub.rows = append(sub.rows, nr)
			sub.b = append(sub.b, tc.b[i])
			sub.eq = append(sub.eq, tc.eq[i])
		}
		if st := sub.build(0).solve(10000, math.Inf(1)); st != lpInfeasible {
			t.Fatalf("case %d: %d workloads, LP infeasible; the %v its proof uses give status %d", it, nw, keep, st)
		}
		if opt := bruteGAP(sub, len(keep), k); !math.IsInf(opt, 1) {
			t.Fatalf("case %d: the reduced set %v has a plan (%g)", it, keep, opt)
		}
	}
	if infeasible < 100 || reduced < 20 {
		t.Fatalf("%d infeasible programs, %d reduced: the test needs more of both", infeasible, reduced)
	}
	t.Logf("%d infeasible programs, %d reduced by their proof", infeasible, reduced)
}
