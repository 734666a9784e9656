package optimizer

import (
	"slices"

	"github.com/gpubroker/gpubroker/pricing"
)

// A quota row can be implied by others: a family quota of 2,940 H100 GPUs
// over the three clouds whose own H100 quotas sum to 2,823 never binds,
// because every H100 a plan takes also counts against one of the cloud
// quotas. The plans that meet every row are the same with the family cap
// lowered to 2,823, so a Lagrangian bound over the lowered caps is a bound
// of the same problem, and never a lower one for the same multipliers:
// L'(μ) = L(μ) + Σ_F μ_F (cap_F − cap'_F). The subgradient method does not
// find that on its own: it prices an implied row from the first steps
// (the cheap H100s want more than the family cap) and keeps a positive
// price on it while it has slack (docs/BENCHMARKS.md, branch large10k).

// impliedCaps returns the rows' capacities with every quota or spot pool
// row F lowered to the sum of the caps of the rows inside it (rows that
// every offer bought any way that counts against them also counts against
// F) when every offer bought any way that counts against F counts against
// one of them too. Budget rows are unchanged. Rows' use is GPUs per offer
// bought one way (option.uses, svcPriced), so the relation holds for every
// option of every workload, service layouts outside the candidates
// included.
func (s *solver) impliedCaps() []float64 {
	caps := append([]float64(nil), s.caps...)
	// Every way an offer can be bought, as its list of rows.
	var combos [][]int32
	for i := range s.offers {
		combos = append(combos, s.rowsOf(int32(i), pricing.OnDemand))
		if s.offers[i].SpotPrice > 0 {
			combos = append(combos, s.rowsOf(int32(i), pricing.Spot))
		}
	}
	n := len(s.caps)
	// within[r] is the set of rows every combo using r also uses (r
	// included); nil when no combo uses r.
	within := make([][]int32, n)
	for _, rows := range combos {
		for _, r := range rows {
			if within[r] == nil {
				within[r] = append([]int32(nil), rows...)
				slices.Sort(within[r])
				continue
			}
			within[r] = slices.DeleteFunc(within[r], func(x int32) bool { return !slices.Contains(rows, x) })
		}
	}
	inside := func(r, f int32) bool { return within[r] != nil && slices.Contains(within[r], f) }
	for f := int32(0); int(f) < n; f++ {
		if within[f] == nil || !s.isQuotaOrPool(f) {
			continue
		}
		// The rows inside f, less those inside another one (the larger
		// row covers them; of two rows over the same offers the one with
		// the smaller cap is kept, then the first).
		var in []int32
		for r := int32(0); int(r) < n; r++ {
			if r != f && s.isQuotaOrPool(r) && inside(r, f) {
				in = append(in, r)
			}
		}
		var cover []int32
		for _, r := range in {
			dominated := false
			for _, r2 := range in {
				if r2 == r || !inside(r, r2) {
					continue
				}
				same := inside(r2, r)
				if !same || s.caps[r2] < s.caps[r] || s.caps[r2] == s.caps[r] && r2 < r {
					dominated = true
					break
				}
			}
			if !dominated {
				cover = append(cover, r)
			}
		}
		if len(cover) == 0 {
			continue
		}
		covered := true
		for _, rows := range combos {
			if slices.Contains(rows, f) && !slices.ContainsFunc(rows, func(x int32) bool { return slices.Contains(cover, x) }) {
				covered = false
				break
			}
		}
		if !covered {
			continue
		}
		sum := 0.0
		for _, r := range cover {
			sum += s.caps[r]
		}
		caps[f] = min(caps[f], sum)
	}
	return caps
}

// isQuotaOrPool says whether row r counts GPUs (a quota or a spot pool),
// not USD (a budget).
func (s *solver) isQuotaOrPool(r int32) bool {
	return int(r) < len(s.quotas) || s.isPoolRow(r)
}
