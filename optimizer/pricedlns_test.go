package optimizer_test

import (
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/optimizer/hardgen"
	"github.com/gpubroker/gpubroker/pricing"
)

// TestPricedChainsHardFleet is hardgen 148 / seed 1 (tightness 0.6), where
// CBC proves the optimum 97,966.12 and the sampled chains stop at
// 98,446.18 (0.49% above): the optimum moves an 8-GPU A100 job to an
// option $334 cheaper through full A100, Europe and *west* rows, a chain
// of eight workloads no sampled set held. The priced neighbourhoods
// (pricedlns.go) bring it to 98,005.54, 0.04% above the optimum.
// docs/BENCHMARKS.md, branch place12.
func TestPricedChainsHardFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and solves a 148-workload hard fleet (about 15 CPU-s)")
	}
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	p, err := hardgen.Generate(cat, 150, 1, hardgen.Options{Tightness: 0.6})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: p, Now: cat.GeneratedAt.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	const (
		optimum = 97966.12 // CBC 2.10.8, proven optimal over the same candidates
		before  = 98446.18 // the sampled chains alone
		want    = 98005.54
	)
	got := plan.Totals.ExpectedCost
	if got < optimum-0.01 {
		t.Fatalf("plan %.2f below the proven optimum %.2f", got, optimum)
	}
	if got > want+0.01 {
		t.Errorf("plan %.2f, want %.2f or less (%.3f%% above the optimum; %.2f without the priced neighbourhoods)", got, want, 100*(got-optimum)/optimum, before)
	}
}
