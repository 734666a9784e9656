package optimizer_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/optimizer/hardgen"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// TestChainsPricedSeeds: on a hard fleet of more than 1,000 workloads
// (hardgen: quotas, budgets and spot pools at the feasibility edge), the
// chain search whose seeds are drawn by priced excess at the multipliers,
// each aimed at its priced-cheapest option, reaches a cheaper plan than the
// same search drawing half its seeds by saving and half uniformly (as
// before), from the same plan with the same budget (mean over three
// generators). Deterministic: fixed-seed generators throughout.
func TestChainsPricedSeeds(t *testing.T) {
	if testing.Short() {
		t.Skip("1,200-workload hard fleet")
	}
	cat, p := hardFleet1200(t)
	r, err := optimizer.CompareChainSeeds(optimizer.Input{Catalog: cat, Policy: p, Now: cat.GeneratedAt.Add(time.Hour)}, 2_000_000_000)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d workloads: bound %.2f, start %.2f, mean of saving seeds %.2f, of priced seeds %.2f", len(p.Workloads), r.Bound, r.Start, r.Saving, r.Priced)
	if r.Priced >= r.Saving {
		t.Errorf("priced seeds %.2f, not below saving seeds %.2f", r.Priced, r.Saving)
	}
}

// TestSubSearchRowLists: the chain search lists each workload's rows once
// (its candidates are fixed while it runs) and its sub-searches take the
// rows a set touches from those lists instead of scanning every
// candidate of the set: the same rows in the same order, so the same
// nodes, costs and picks, on a hard 1,200-workload fleet.
func TestSubSearchRowLists(t *testing.T) {
	if testing.Short() {
		t.Skip("1,200-workload hard fleet")
	}
	cat, p := hardFleet1200(t)
	better, err := optimizer.CompareSubSearches(optimizer.Input{Catalog: cat, Policy: p, Now: cat.GeneratedAt.Add(time.Hour)}, 100)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("100 sets, %d improving", better)
	if better == 0 {
		t.Errorf("no set improved: the sets do not exercise the search")
	}
}

// hardFleet1200 is hardgen's 1,200-workload fleet (seed 1, tightness 0.6)
// on the embedded catalog, generated once for the tests that share it.
var hardFleet1200 = func() func(t *testing.T) (*pricing.Catalog, *policy.Policy) {
	var (
		once sync.Once
		cat  *pricing.Catalog
		pol  *policy.Policy
		err  error
	)
	return func(t *testing.T) (*pricing.Catalog, *policy.Policy) {
		t.Helper()
		once.Do(func() { cat, pol, err = generateHard(1200, 1, 0.6) })
		if err != nil {
			t.Fatal(err)
		}
		cp := *pol
		cp.Workloads = slices.Clone(pol.Workloads)
		return cat, &cp
	}
}()

// generateHard is hardgen's fleet of n workloads (seed, tightness) on the
// embedded catalog.
func generateHard(n int, seed uint64, tightness float64) (*pricing.Catalog, *policy.Policy, error) {
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		return nil, nil, err
	}
	p, err := hardgen.Generate(cat, n, seed, hardgen.Options{Tightness: tightness})
	return cat, p, err
}
