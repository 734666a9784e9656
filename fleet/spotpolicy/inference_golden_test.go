package spotpolicy

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/adaptive_decisions.golden from the policy as it is")

// The adaptive policy decides on random states, tick after tick, exactly
// as recorded in testdata/adaptive_decisions.golden (made by the policy
// before its tick moved into kept memory: survivals, spread order and
// candidates). Every decision is printed only once all ticks are taken,
// so a decision whose Spot shares memory that a later tick writes fails
// too.
func TestAdaptiveInferenceDecisionsGolden(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 14))
	type run struct {
		name  string
		fleet []Fleet
	}
	var runs []run
	for r := range 8 {
		a := NewAdaptiveInference(DefaultAdaptiveInferenceConfig())
		zones := r % 7 // none to six
		target := 1 + rng.IntN(6)
		od := []float64{0, 3, 1.2, 5}[rng.IntN(4)]
		x := run{name: fmt.Sprintf("run %d: %d zones, target %d, on-demand price %g", r, zones, target, od)}
		for tick := range 150 {
			if tick%50 == 49 {
				target = 1 + rng.IntN(6) // the replica count moves
			}
			s := &InferenceState{Tick: tick, Gap: 60, Target: target, ReadyDelay: 600, SpotPrice: 1, OnDemandPrice: od}
			s.Zones = randomZones(rng, s.Zones, zones)
			s.OnDemand = rng.IntN(target + 1)
			s.OnDemandReady = rng.IntN(s.OnDemand + 1)
			x.fleet = append(x.fleet, a.Decide(s))
		}
		runs = append(runs, x)
	}
	var b strings.Builder
	for _, x := range runs {
		fmt.Fprintln(&b, x.name)
		for tick, f := range x.fleet {
			fmt.Fprintf(&b, "%d spot %v on-demand %d\n", tick, f.Spot, f.OnDemand)
		}
	}
	path := filepath.Join("testdata", "adaptive_decisions.golden")
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, wantLines := strings.Split(b.String(), "\n"), strings.Split(string(want), "\n")
	for i := range min(len(got), len(wantLines)) {
		if got[i] != wantLines[i] {
			t.Fatalf("line %d: got %q, want %q", i+1, got[i], wantLines[i])
		}
	}
	if len(got) != len(wantLines) {
		t.Fatalf("%d lines, want %d", len(got), len(wantLines))
	}
}

// A spreader stepped n times holds spreadIn's n replicas, for every n up
// to where no zone takes more (then it says so and stays put).
func TestSpreaderStepsAsSpreadIn(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 2))
	for c := range 300 {
		zones := make([]Zone, rng.IntN(6))
		total := 0
		for k := range zones {
			zones[k].Capacity = rng.IntN(4)
			total += zones[k].Capacity
		}
		order := rng.Perm(len(zones))
		x := spreader{out: make([]int, len(zones)), order: order}
		for n := 1; n <= total+2; n++ {
			ok := x.step(zones)
			want := spreadIn(zones, n, order)
			if ok != (n <= total) || !slices.Equal(x.out, want) || x.placed != min(n, total) {
				t.Fatalf("case %d (capacities %v, order %v), %d replicas: step %v, %v (%d placed); spreadIn %v",
					c, zones, order, n, ok, x.out, x.placed, want)
			}
		}
	}
}
