package optimizer

import "math"

// A small dense linear program solver for the exact sub-MIPs of submip.go:
//
//	min c·x  subject to  A x + s = b,  lo ≤ x ≤ up,  s ≥ 0 (≤ rows) or s = 0 (= rows)
//
// solved with the bounded-variable dual simplex method on a dense tableau.
// The all-slack basis with every structural at its lower bound is dual
// feasible when c ≥ 0 and every lower bound is finite, which is always so
// here (costs are shifted to be non-negative, bounds are [0, 1]), so no
// phase one is needed; and a branch that changes a variable's bounds keeps
// the basis dual feasible, so a child re-optimises from its parent's
// tableau in a few pivots. Sizes are small (tens of rows, a few thousand
// columns), so the tableau is dense.

// lpStatus is the outcome of lp.solve.
type lpStatus int

const (
	lpOptimal lpStatus = iota
	lpInfeasible
	lpIterLimit
)

// lpCol is one nonzero of a structural column.
type lpCol struct {
	row  int
	coef float64
}

type lp struct {
	m, n int // rows, structural columns (slacks are n..n+m-1)
	// t is B⁻¹A, row-major m × (n+m); d the reduced costs; xb the
	// basic variables' values; basis the basic variable of each row.
	t     []float64
	d     []float64
	xb    []float64
	basis []int
	// lo, up bound every variable; atUp says a nonbasic one sits at
	// its upper bound; isBasic is the inverse of basis (-1: nonbasic).
	lo, up  []float64
	atUp    []bool
	isBasic []int
	c       []float64
	iters   int
	// scale is each row's scale factor, rhs its right-hand side
	// (unscaled). Rows from rows on are cut rows, empty (all zero,
	// their slack basic at 0) until addCut fills them.
	scale, rhs []float64
	rows       int
	// nz is pivot's scratch.
	nz []int32
	// proofRow is the tableau row that proved the last solve infeasible
	// (-1: none did): row r of B⁻¹ combines the rows into one that no
	// values within the bounds satisfy (usedRow).
	proofRow int
}

// newLP builds the program with the all-slack basis: cols[j] are the
// nonzeros of structural j, b the right-hand sides, eq the rows that are
// equalities; structurals are bounded by [0, 1]. Every row is scaled by
// its largest coefficient (budget rows are in dollars, quota rows in
// GPUs).
func newLP(c []float64, cols [][]lpCol, b []float64, eq []bool, cuts int) *lp {
	rows, n := len(b), len(c)
	m := rows + cuts
	w := n + m
	p := &lp{
		m: m, n: n,
		t:        make([]float64, m*w),
		d:        make([]float64, w),
		xb:       make([]float64, m),
		basis:    make([]int, m),
		lo:       make([]float64, w),
		up:       make([]float64, w),
		atUp:     make([]bool, w),
		isBasic:  make([]int, w),
		c:        append([]float64(nil), c...),
		scale:    make([]float64, m),
		rhs:      append(append([]float64(nil), b...), make([]float64, cuts)...),
		proofRow: -1,
	}
	scale := make([]float64, m)
	for j, col := range cols {
		for _, e := range col {
			scale[e.row] = max(scale[e.row], math.Abs(e.coef))
			p.t[e.row*w+j] += e.coef
		}
	}
	for i := 0; i < m; i++ {
		f := 1.0
		if scale[i] > 0 {
			f = 1 / scale[i]
		}
		row := p.t[i*w : (i+1)*w]
		for j := 0; j < n; j++ {
			row[j] *= f
		}
		row[n+i] = 1
		if i < rows {
			p.xb[i] = b[i] * f
		}
		p.scale[i] = f
		p.basis[i] = n + i
	}
	p.rows = rows
	for j := 0; j < w; j++ {
		p.isBasic[j] = -1
		if j < n {
			p.d[j] = c[j]
			p.up[j] = 1
		} else {
			p.up[j] = math.Inf(1)
			if j-n >= rows || eq[j-n] {
				p.up[j] = 0 // cut rows: until addCut fills them
			}
		}
	}
	for i, j := range p.basis {
		p.isBasic[j] = i
	}
	return p
}

// clone copies the program, for a branch.
func (p *lp) clone() *lp {
	q := *p
	q.t = append([]float64(nil), p.t...)
	q.d = append([]float64(nil), p.d...)
	q.xb = append([]float64(nil), p.xb...)
	q.basis = append([]int(nil), p.basis...)
	q.lo = append([]float64(nil), p.lo...)
	q.up = append([]float64(nil), p.up...)
	q.atUp = append([]bool(nil), p.atUp...)
	q.isBasic = append([]int(nil), p.isBasic...)
	q.rhs = append([]float64(nil), p.rhs...)
	q.nz = nil
	return &q
}

const (
	lpFeasTol  = 1e-7
	lpPivotTol = 1e-9
	// lpProofTol: a multiplier below it is taken as zero (usedRow).
	lpProofTol = 1e-12
)

// value is variable j's current value.
func (p *lp) value(j int) float64 {
	if i := p.isBasic[j]; i >= 0 {
		return p.xb[i]
	}
	if p.atUp[j] {
		return p.up[j]
	}
	return p.lo[j]
}

// objective is c·x at the current basis.
func (p *lp) objective() float64 {
	v := 0.0
	for j := 0; j < p.n; j++ {
		v += p.c[j] * p.value(j)
	}
	return v
}

// setBounds changes structural j's bounds, moving it to the new bound
// when it is nonbasic (the basic values follow). The basis stays dual
// feasible when j stays at the same side (lower or upper) it sat at.
func (p *lp) setBounds(j int, lo, up float64) {
	if p.isBasic[j] >= 0 {
		p.lo[j], p.up[j] = lo, up
		return
	}
	old := p.value(j)
	p.lo[j], p.up[j] = lo, up
	nv := p.value(j)
	if delta := nv - old; delta != 0 {
		w := p.n + p.m
		for i := 0; i < p.m; i++ {
			p.xb[i] -= p.t[i*w+j] * delta
		}
	}
}

// capRow is row i's right-hand side less its slack's lower bound (the
// tightened capacity, unscaled).
func (p *lp) capRow(i int) float64 {
	return p.rhs[i] - p.lo[p.n+i]/p.scale[i]
}

// tightenRow lowers inequality row i's capacity to v by raising its
// slack's lower bound: the system (and so every cut derived from it)
// stays the same, and the basis dual feasible.
func (p *lp) tightenRow(i int, v float64) {
	p.setBounds(p.n+i, (p.rhs[i]-v)*p.scale[i], p.up[p.n+i])
}

// addCut adds the Gomory mixed-integer cut of tableau row i, whose basic
// variable is a structural at a fractional value, into the next empty cut
// row; false when none is left or the row gives no usable cut. Integer
// variables are the structurals (bounds 0 and 1), slacks are continuous.
// With x'ⱼ the distance of nonbasic j from the bound it sits at (α'ⱼ the
// row's coefficient on it) and f₀ the basic value's fraction, the cut is
//
//	Σ_int  min(fⱼ/f₀, (1-fⱼ)/(1-f₀)) x'ⱼ + Σ_cont max(α'ⱼ/f₀, -α'ⱼ/(1-f₀)) x'ⱼ ≥ 1
//
// (fⱼ = frac(α'ⱼ)); it is valid for every integer solution and violated
// by the current one (every x'ⱼ = 0). As a row it reads s = Σ hⱼ xⱼ - h₀ ≥ 0
// in the nonbasic variables, so it enters the tableau as it stands.
func (p *lp) addCut(i int) bool {
	k := -1
	for r := p.rows; r < p.m; r++ {
		if p.isBasic[p.n+r] == r && p.up[p.n+r] == 0 {
			k = r
			break
		}
	}
	if k < 0 {
		return false
	}
	w := p.n + p.m
	beta := p.xb[i]
	f0 := beta - math.Floor(beta)
	if f0 < 0.01 || f0 > 0.99 {
		return false
	}
	ti := p.t[i*w : (i+1)*w]
	g := make([]float64, w)
	gmax, gmin := 0.0, math.Inf(1)
	for j := 0; j < w; j++ {
		if p.isBasic[j] >= 0 || p.lo[j] == p.up[j] {
			continue
		}
		a := ti[j]
		if p.atUp[j] {
			a = -a
		}
		if math.Abs(a) < 1e-11 {
			continue
		}
		var v float64
		if j < p.n {
			fj := a - math.Floor(a)
			if fj <= f0 {
				v = fj / f0
			} else {
				v = (1 - fj) / (1 - f0)
			}
		} else if a > 0 {
			v = a / f0
		} else {
			v = -a / (1 - f0)
		}
		if v < 1e-11 {
			continue
		}
		g[j] = v
		gmax, gmin = max(gmax, v), min(gmin, v)
	}
	if gmax == 0 || gmax/gmin > 1e8 {
		return false
	}
	tk := p.t[k*w : (k+1)*w]
	value := -1.0
	for j, v := range g {
		if v == 0 {
			continue
		}
		// s = Σ gⱼ x'ⱼ - 1: x'ⱼ = xⱼ - loⱼ at lower, upⱼ - xⱼ at upper;
		// the tableau row holds -∂s/∂xⱼ.
		if p.atUp[j] {
			tk[j] = v
		} else {
			tk[j] = -v
		}
	}
	tk[p.n+k] = 1
	p.xb[k] = value
	p.up[p.n+k] = math.Inf(1)
	p.scale[k] = 1
	return true
}

// solve runs the dual simplex method from the current (dual feasible)
// basis, at most maxIter pivots. cutoff stops it early, as infeasible,
// once the objective (which only rises) reaches it.
func (p *lp) solve(maxIter int, cutoff float64) lpStatus {
	w := p.n + p.m
	p.proofRow = -1
	for it := 0; ; it++ {
		// Leaving row: the most infeasible basic variable.
		r, worst := -1, lpFeasTol
		for i, j := range p.basis {
			v := p.xb[i]
			if g := p.lo[j] - v; g > worst {
				r, worst = i, g
			} else if g := v - p.up[j]; g > worst {
				r, worst = i, g
			}
		}
		if r < 0 {
			return lpOptimal
		}
		if it >= maxIter {
			return lpIterLimit
		}
		if it%16 == 15 && p.objective() >= cutoff {
			return lpInfeasible
		}
		lv := p.basis[r]
		below := p.xb[r] < p.lo[lv]
		bound := p.up[lv]
		if below {
			bound = p.lo[lv]
		}
		row := p.t[r*w : (r+1)*w]
		// Entering column: dual ratio test.
		q, best, bestA := -1, math.Inf(1), 0.0
		for j := 0; j < w; j++ {
			if p.isBasic[j] >= 0 || p.lo[j] == p.up[j] {
				continue
			}
			a := row[j]
			if math.Abs(a) < lpPivotTol {
				continue
			}
			// Below its lower bound the leaving variable must rise:
			// the entering one rises (at lower, a < 0) or falls (at
			// upper, a > 0); above its upper bound the reverse.
			ok := (a < 0) != p.atUp[j]
			if !below {
				ok = !ok
			}
			if !ok {
				continue
			}
			ratio := math.Abs(p.d[j]) / math.Abs(a)
			if ratio < best-1e-12 || (ratio <= best+1e-12 && math.Abs(a) > bestA) {
				q, best, bestA = j, ratio, math.Abs(a)
			}
		}
		if q < 0 {
			p.proofRow = r
			return lpInfeasible
		}
		// Primal step: the entering variable moves by theta so that the
		// leaving one lands on its bound.
		theta := (p.xb[r] - bound) / row[q]
		for i := 0; i < p.m; i++ {
			p.xb[i] -= p.t[i*w+q] * theta
		}
		enterVal := p.value(q) + theta
		p.pivot(r, q)
		p.xb[r] = enterVal
		p.isBasic[lv] = -1
		p.atUp[lv] = !below
		p.isBasic[q] = r
		p.basis[r] = q
		p.iters++
	}
}

// usedRow says whether the last solve's proof of infeasibility uses row
// i: its multiplier, row proofRow of B⁻¹ (the slack columns of the
// tableau), is not zero. Rows it does not use can go, with any columns,
// and the same combination still proves the rest infeasible: each column
// only widens the range its bounds (which hold zero) let the combined row
// take. False for every row when no solve proved infeasibility.
func (p *lp) usedRow(i int) bool {
	if p.proofRow < 0 {
		return false
	}
	w := p.n + p.m
	return math.Abs(p.t[p.proofRow*w+p.n+i]) > lpProofTol
}

// pivot makes column q basic in row r (tableau and reduced costs). The
// tableau is sparse in practice (each column touches one workload's row
// and a few capacity rows), so the update runs over the pivot row's
// nonzeros only.
func (p *lp) pivot(r, q int) {
	w := p.n + p.m
	row := p.t[r*w : (r+1)*w]
	inv := 1 / row[q]
	nz := p.nz[:0]
	for j, v := range row {
		if v != 0 {
			row[j] = v * inv
			nz = append(nz, int32(j))
		}
	}
	p.nz = nz
	row[q] = 1
	for i := 0; i < p.m; i++ {
		if i == r {
			continue
		}
		ri := p.t[i*w : (i+1)*w]
		f := ri[q]
		if f == 0 {
			continue
		}
		for _, j := range nz {
			ri[j] -= f * row[j]
		}
		ri[q] = 0
	}
	if f := p.d[q]; f != 0 {
		for _, j := range nz {
			p.d[j] -= f * row[j]
		}
		p.d[q] = 0
	}
}
